"""Generic Markdown for the free-form ``inputs`` / ``assumptions`` dicts: new keys appear without code changes.

Layout of one dict (keys sorted, nested dicts flattened to dotted keys):

* scalars and lists → a bullet list ``- key: value``;
* a dict whose values are all dicts (one entry per GPU, per link...) → a table, one row per entry
  (or, ``transpose=True``, one row per parameter and one column per entry);
* any other dict → a sub-heading and its own bullet list.

Floats print with 6 significant digits, booleans as yes/no, None as ``none``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pdplan.report.common import mapping, union_keys

_TITLES = {"gpus": "GPUs", "slo": "SLO", "kv": "KV", "ttft": "TTFT", "tpot": "TPOT"}


def scalar(value: Any) -> str:
    """Deterministic text of one leaf value."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, list | tuple):
        return ", ".join(scalar(v) for v in value) if value else "none"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {scalar(value[k])}" for k in sorted(value, key=str)) or "none"
    return str(value)


def title(key: str) -> str:
    """Heading text of a key: ``search_space`` → ``Search space``, ``gpus`` → ``GPUs``."""
    words = [_TITLES.get(w, w) for w in str(key).split("_")]
    first = words[0] if words[0] in _TITLES.values() else words[0][:1].upper() + words[0][1:]
    return " ".join([first, *words[1:]])


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to dotted keys (``{"gemm": {"bf16": 0.8}}`` → ``{"gemm.bf16": 0.8}``)."""
    out: dict[str, Any] = {}
    for key in sorted(value, key=str):
        name = f"{prefix}{key}"
        item = value[key]
        if isinstance(item, Mapping) and item:
            out.update(flatten(item, name + "."))
        else:
            out[name] = item
    return out


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def bullets(value: Mapping[str, Any]) -> list[str]:
    """``- key: value`` lines of a flattened dict."""
    return [f"- {key}: {cell(scalar(item))}" for key, item in flatten(value).items()]


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, Mapping) and v for v in value.values())


def table(value: Mapping[str, Any], *, transpose: bool = False, first: str = "name") -> list[str]:
    """A Markdown table of a dict of dicts (rows sorted by name)."""
    names = sorted(value, key=str)
    rows = {name: flatten(mapping(value[name])) for name in names}
    keys = union_keys(rows.values())
    if transpose:
        header, body = ["parameter", *names], [[k] + [scalar(rows[n].get(k)) for n in names] for k in keys]
    else:
        header, body = [first, *keys], [[n] + [scalar(rows[n].get(k)) for k in keys] for n in names]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return lines


def sections(
    value: Mapping[str, Any], *, level: int = 3, first_keys: tuple[str, ...] = (), transpose: bool = False
) -> list[str]:
    """Markdown lines for a whole dict: scalar bullets first, then one sub-section per nested dict.

    ``first_keys`` come first in that order; the other keys follow sorted.
    """
    order = [k for k in first_keys if k in value] + sorted((k for k in value if k not in first_keys), key=str)
    flat = [k for k in order if not isinstance(value[k], Mapping) or not value[k]]
    lines = [f"- {k}: {cell(scalar(value[k]))}" for k in flat]
    for key in order:
        item = value[key]
        if key in flat:
            continue
        lines += ["", f"{'#' * level} {title(key)}", ""]
        lines += table(item, transpose=transpose) if _is_table(item) else bullets(item)
    return lines
