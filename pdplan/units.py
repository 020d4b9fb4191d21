"""One parser for the human units used in every pdplan input, and SI constants.

Everything inside pdplan is SI: bytes, bytes/s, FLOP/s, seconds. Human units appear only at the edges
(YAML, CLI flags, reports). The grammar is ``<number> [<prefix>]<unit>`` with optional spaces:

* sizes: ``B`` (bytes) or ``b``/``bit`` (bits); SI prefixes k, M, G, T, P (powers of 1000) and binary prefixes
  Ki, Mi, Gi, Ti, Pi (powers of 1024). ``80 GiB`` = 80·2^30 B; ``141 GB`` = 141·10^9 B; ``8 Gb`` = 10^9 B.
* rates: a size per second, ``/s`` or ``ps``: ``3.35 TB/s``, ``400 Gb/s`` (= 50·10^9 B/s), ``400 Gbps``.
  Bits are converted to bytes exactly (÷ 8).
* FLOP rates: ``989 TFLOPS``, ``989 TFLOP/s`` (SI prefixes only; binary prefixes are an error).
* times: ``s``, ``ms``, ``us``/``µs``, ``ns``, ``min``, ``h``; a bare number is seconds: ``400ms`` = 0.4.

Case matters where it carries meaning (``b`` bit vs ``B`` byte, ``m`` milli vs ``M`` mega); anything outside the
grammar raises :class:`pdplan.errors.UnitError` naming the allowed forms, never a guess.
"""

from __future__ import annotations

import math
import re

from pdplan.errors import UnitError

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2.0**10
MIB = 2.0**20
GIB = 2.0**30
TIB = 2.0**40

SI_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BINARY_PREFIX = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
TIME_UNIT_S = {
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
    "min": 60.0,
    "h": 3600.0,
}

_NUMBER = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[^\s\d].*?)?\s*$")
_SIZE_UNIT = re.compile(r"^(?P<prefix>Ki|Mi|Gi|Ti|Pi|[kKMGTP]?)(?P<base>B|b|bit|bits|byte|bytes)$")
_RATE_SUFFIX = re.compile(r"^(?P<size>.+?)(?:/s|ps)$")
_FLOPS_UNIT = re.compile(r"^(?P<prefix>[kKMGTP]?)(?:FLOPS|FLOP/s|flops|flop/s)$")

SIZE_FORMS = "a size like '80 GiB', '141 GB', '512 MiB', '8 Gb' (B = bytes, b = bits)"
RATE_FORMS = "a rate like '3.35 TB/s', '400 Gb/s', '400 Gbps', '50 GB/s'"
FLOPS_FORMS = "a FLOP rate like '989 TFLOPS' or '989.4 TFLOP/s'"
TIME_FORMS = "a time like '400ms', '1.5 s', '2 us' (a bare number is seconds)"


def _split(text: object, forms: str) -> tuple[float, str]:
    """Split ``'3.35 TB/s'`` into ``(3.35, 'TB/s')``; numbers pass through with an empty unit."""
    if isinstance(text, bool):
        raise UnitError(f"expected {forms}, got {text!r}")
    if isinstance(text, int | float):
        return float(text), ""
    if not isinstance(text, str):
        raise UnitError(f"expected {forms}, got {type(text).__name__} {text!r}")
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(f"cannot read {text!r}; expected {forms}")
    value = float(match["num"])
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not a finite number; expected {forms}")
    return value, (match["unit"] or "")


def _size_factor(unit: str) -> float | None:
    """Bytes per unit for a size unit (``GiB`` → 2^30, ``Gb`` → 1.25e8), or None if not a size unit."""
    match = _SIZE_UNIT.match(unit)
    if match is None:
        return None
    prefix = match["prefix"]
    scale = BINARY_PREFIX.get(prefix, SI_PREFIX.get(prefix))
    if scale is None:
        return None
    bits = match["base"] in ("b", "bit", "bits")
    return scale / 8.0 if bits else scale


def parse_size_bytes(text: object) -> float:
    """Bytes in a size string: ``parse_size_bytes('80 GiB') == 80 * 2**30``; a bare number is bytes."""
    value, unit = _split(text, SIZE_FORMS)
    if unit == "":
        return value
    factor = _size_factor(unit)
    if factor is None:
        raise UnitError(f"cannot read {text!r}; expected {SIZE_FORMS}")
    return value * factor


def parse_rate_bytes_per_s(text: object) -> float:
    """Bytes/s in a rate string: ``'400 Gb/s'`` → 5e10, ``'3.35 TB/s'`` → 3.35e12; a bare number is B/s."""
    value, unit = _split(text, RATE_FORMS)
    if unit == "":
        return value
    match = _RATE_SUFFIX.match(unit)
    factor = _size_factor(match["size"]) if match else None
    if factor is None:
        raise UnitError(f"cannot read {text!r}; expected {RATE_FORMS}")
    return value * factor


def parse_flops_per_s(text: object) -> float:
    """FLOP/s in a FLOP-rate string: ``'989 TFLOPS'`` → 9.89e14; a bare number is FLOP/s."""
    value, unit = _split(text, FLOPS_FORMS)
    if unit == "":
        return value
    match = _FLOPS_UNIT.match(unit)
    if match is None:
        raise UnitError(f"cannot read {text!r}; expected {FLOPS_FORMS}")
    return value * SI_PREFIX[match["prefix"]]


def parse_time_s(text: object) -> float:
    """Seconds in a time string: ``'400ms'`` → 0.4, ``'1.5 s'`` → 1.5, ``'2'`` → 2.0."""
    value, unit = _split(text, TIME_FORMS)
    if unit == "":
        return value
    factor = TIME_UNIT_S.get(unit)
    if factor is None:
        raise UnitError(f"cannot read {text!r}; expected {TIME_FORMS}")
    return value * factor


def format_bytes(n_bytes: float) -> str:
    """Human size with binary prefixes for reports: ``format_bytes(1.5 * 2**30) == '1.50 GiB'``."""
    for prefix, scale in (("Ti", TIB), ("Gi", GIB), ("Mi", MIB), ("Ki", KIB)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.2f} {prefix}B"
    return f"{n_bytes:.0f} B"


def format_time(seconds: float) -> str:
    """Human time for reports: ``format_time(0.0123) == '12.3 ms'``."""
    if abs(seconds) >= 1.0:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"


def is_bare_number(text: object) -> bool:
    """Whether ``text`` is a number with no unit (``100``, ``'100'``, ``' 0.2 '``), read in the base unit."""
    if isinstance(text, bool):
        return False
    if isinstance(text, int | float):
        return True
    if not isinstance(text, str):
        return False
    match = _QUANTITY.match(text)
    return match is not None and not match["unit"]
