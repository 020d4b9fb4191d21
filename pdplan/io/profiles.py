"""Measured prefill profiles: CSV ``tokens,prefill_s[,kv_bytes]`` (one prefill instance; SI units).

Lines starting with ``#`` are comments (the bundled profiles carry their source there). A bare name
(no ``/``, no ``.csv``) is a bundled profile under ``pdplan/data/profiles``. Every failure is a one-line
:class:`SpecError` naming the file, the row and the column. Interpolation is the serving layer's
(:mod:`pdplan.serving.prfaas.profile`).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.files import read_text_file
from pdplan.types import FloatArray

PROFILE_COLUMNS = ("tokens", "prefill_s", "kv_bytes")


@dataclass(frozen=True, eq=False)
class ProfileTable:
    tokens: FloatArray
    prefill_s: FloatArray
    kv_bytes: FloatArray | None
    source: str


def bundled_profiles() -> dict[str, Path]:
    folder = resources.files("pdplan").joinpath("data", "profiles")
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".csv")}


def resolve_profile(ref: str, base_dir: Path | None = None) -> Path:
    """A bundled name or a path (relative paths resolve against ``base_dir``)."""
    if "/" not in ref and not ref.endswith(".csv"):
        presets = bundled_profiles()
        if ref not in presets:
            raise UnknownNameError("prefill profile", ref, presets)
        return presets[ref]
    path = Path(ref)
    return path if path.is_absolute() or base_dir is None else base_dir / path


def _cell(row: list[str], col: int, name: str, where: str, line: int) -> float:
    try:
        value = float(row[col])
    except (ValueError, IndexError):
        raise SpecError(f"row {line}: {name} must be a number", source=where, field=name) from None
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"row {line}: {name} must be finite and > 0 (got {value})", source=where, field=name)
    return value


def load_profile(path: Path) -> ProfileTable:
    """Read a profile CSV; SpecError on a bad header or value."""
    where = str(path)
    text = read_text_file(path)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        raise SpecError("empty profile; expected header tokens,prefill_s[,kv_bytes]", source=where)
    header = [h.strip() for h in rows[0]]
    if header not in (list(PROFILE_COLUMNS[:2]), list(PROFILE_COLUMNS)):
        raise SpecError(f"header {','.join(header)!r}; expected tokens,prefill_s[,kv_bytes]", source=where)
    body = rows[1:]
    if len(body) < 2:
        raise SpecError("a profile needs at least 2 rows", source=where)
    cols = np.array(
        [[_cell(r, c, header[c], where, i + 2) for c in range(len(header))] for i, r in enumerate(body)],
        dtype=np.float64,
    )
    kv = cols[:, 2].copy() if len(header) == 3 else None
    return ProfileTable(tokens=cols[:, 0].copy(), prefill_s=cols[:, 1].copy(), kv_bytes=kv, source=path.name)
