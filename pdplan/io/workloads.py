"""Workload files: a workload YAML or inline block, the bundled presets, and traces (read once, cached).

Every failure becomes a one-line :class:`~pdplan.errors.SpecError` naming the file, the field (or trace row and
column) and what is allowed. Binning a loaded workload into length bins is :mod:`pdplan.workload.bins`.

``--workload FILE`` (:func:`load_workload`) tells the kinds of file apart explicitly, never by trial
(docs/reuse_workloads.md §7):

1. a name ending in ``.jsonl`` is a Mooncake trace (:mod:`pdplan.io.traces_mooncake`): its requests, block size 512
   (``pdplan/data/workload_formats.yaml``) and its own arrival times (``arrival: trace``);
2. otherwise the file is YAML; a mapping with inference-perf's top-level ``data`` or ``load`` key and none of pdplan's
   workload keys is an inference-perf config (:mod:`pdplan.io.inference_perf`);
3. anything else is a pdplan workload file (docs/architecture.md §4).

A trace named in a workload follows its suffix the same way: ``.jsonl`` is Mooncake's JSONL, anything else the CSV.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.files import read_yaml_mapping
from pdplan.io.inference_perf import inference_perf_workload, is_inference_perf_config
from pdplan.specs.base import first_error_line
from pdplan.specs.workload import WorkloadSpec, allowed_fields, trace_format_of
from pdplan.types import FloatArray, Int64Array

TRACE_COLUMNS = ("input_tokens", "output_tokens", "arrival_s")
MAX_TRACE_BYTES = 500_000_000


# ---------------------------------------------------------------------------------------- loading
def workload_from_dict(data: dict[str, Any], *, source: str, base_dir: Path) -> WorkloadSpec:
    """Validate a workload mapping (a file, or a scenario's ``workload:`` block) into a spec.

    Relative trace paths resolve against ``base_dir``; a trace file is read once here so that its
    errors surface at load time (a Mooncake trace with its block counts checked). A Mooncake trace that
    does not give ``block_tokens`` gets the format's published block size. Errors: one-line
    :class:`SpecError` naming ``source`` and field.
    """
    try:
        spec = WorkloadSpec.model_validate(_with_block_tokens(data), context={"base_dir": base_dir})
    except ValidationError as err:
        field, message = first_error_line(err)
        if err.errors()[0]["type"] == "extra_forbidden":
            message += f"; allowed: {', '.join(allowed_fields(err.errors()[0]['loc']))}"
        top = field == "(top level)"
        raise SpecError(message, source=source, field=None if top else field) from None
    if spec.trace is not None:
        try:
            if spec.trace.block_tokens is not None:
                from pdplan.io.traces_mooncake import load_mooncake_trace  # lazy: a Mooncake trace (issue #27)

                load_mooncake_trace(spec.trace.file, spec.trace.block_tokens)
            trace = load_trace(spec.trace.file)
        except SpecError as err:
            raise SpecError(str(err), source=source, field="trace") from None
        if spec.arrival == "trace":
            _check_replayable(trace.arrival_s, source)
    return spec


def _check_replayable(arrival_s: FloatArray | None, source: str) -> None:
    """``arrival: trace`` replays the trace's times at their own rate, and the serving model measures c_a² from the
    gaps between them (:func:`pdplan.queueing.arrivals.empirical_ca2`): it needs the times, and at least 3 of them
    spread over a positive span."""
    if arrival_s is None:
        raise SpecError("the trace has no arrival_s column (needed by arrival: trace)", source=source, field="arrival")
    if arrival_s.size < 3 or arrival_s[-1] <= arrival_s[0]:
        raise SpecError(
            f"the trace's {arrival_s.size} request(s) arrive over {float(arrival_s[-1] - arrival_s[0]):g} s; "
            "replaying their times (arrival: trace) needs at least 3 spread over time, whose gaps give the rate and "
            "c_a² (a workload file naming the trace with arrival: poisson sends its requests at a --rate instead)",
            source=source,
            field="arrival",
        )


def _with_block_tokens(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with Mooncake's block size filled into a Mooncake trace that leaves it out."""
    key = "trace" if "trace" in data else "input_tokens"
    trace = data.get(key)
    if isinstance(trace, str | Path):
        trace = {"file": trace}
    if not isinstance(trace, dict) or (key == "input_tokens" and trace.get("dist") != "trace"):
        return data
    fmt = trace.get("format") or (trace_format_of(trace["file"]) if isinstance(trace.get("file"), str | Path) else None)
    if fmt != "mooncake" or "block_tokens" in trace:
        return data
    from pdplan.io.workload_formats import mooncake_block_tokens  # lazy: a Mooncake trace (start-up, issue #27)

    filled: dict[str, Any] = {**data, key: {**trace, "block_tokens": mooncake_block_tokens()}}
    if key == "input_tokens" and data.get("output_tokens") == data["input_tokens"]:
        filled["output_tokens"] = filled["input_tokens"]
    return filled


def load_workload(path: str | Path) -> WorkloadSpec:
    """Read and validate a workload file: a Mooncake JSONL trace, an inference-perf config or a pdplan workload
    YAML (module docstring; docs/architecture.md §4)."""
    path = Path(path)
    if trace_format_of(path) == "mooncake":
        from pdplan.io.traces_mooncake import load_mooncake_trace  # lazy: a Mooncake trace (start-up, issue #27)
        from pdplan.io.workload_formats import mooncake_block_tokens

        load_mooncake_trace(path, mooncake_block_tokens())  # its errors name this file and line: nothing to wrap
        return workload_from_dict(
            {"name": path.stem, "trace": path.name, "arrival": "trace"}, source=str(path), base_dir=path.parent
        )
    data = read_yaml_mapping(path)
    if is_inference_perf_config(data):
        return inference_perf_workload(data, source=str(path), name=path.stem).workload
    return workload_from_dict(data, source=str(path), base_dir=path.parent)


def list_presets() -> dict[str, Path]:
    """Bundled workload presets: name -> YAML path (package data ``pdplan/data/workloads/*.yaml``)."""
    folder = resources.files("pdplan").joinpath("data", "workloads")
    entries = [e for e in folder.iterdir() if e.name.endswith(".yaml")] if folder.is_dir() else []
    entries.sort(key=lambda e: e.name)
    return {e.name.removesuffix(".yaml"): Path(str(e)) for e in entries}


def load_preset_workload(name: str) -> WorkloadSpec:
    """A bundled preset by name (``chat``, ``splitwise-coding``, ...); unknown names get hints."""
    presets = list_presets()
    if name not in presets:
        raise UnknownNameError("workload preset", name, presets)
    return load_workload(presets[name])


# ---------------------------------------------------------------------------------------- traces
@dataclass(frozen=True, eq=False)
class TraceData:
    """A validated trace: integer lengths >= 1 and, if present, non-decreasing arrival times (s)."""

    input_tokens: Int64Array
    output_tokens: Int64Array
    arrival_s: FloatArray | None


def load_trace(path: Path) -> TraceData:
    """Read a trace's lengths and arrival times: a CSV (``input_tokens,output_tokens[,arrival_s]``; errors name
    file and row), or a Mooncake JSONL (by its suffix; errors name file and line; timestamps in ms become
    ``arrival_s``)."""
    path = Path(path)
    if trace_format_of(path) == "mooncake":
        from pdplan.io.traces_mooncake import read_mooncake_trace  # lazy: a Mooncake trace (start-up, issue #27)

        mooncake = read_mooncake_trace(path)
        return TraceData(mooncake.input_tokens, mooncake.output_tokens, mooncake.arrival_s)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "not found"
        raise SpecError(f"trace file {what}", source=str(path))
    stat = path.stat()
    return _load_trace_cached(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load_trace_cached(path: str, mtime_ns: int, size: int) -> TraceData:
    del mtime_ns  # part of the cache key only
    if size > MAX_TRACE_BYTES:
        raise SpecError(f"trace is {size} bytes; the limit is {MAX_TRACE_BYTES}", source=path)
    raw = Path(path).read_bytes()
    if b"\x00" in raw:
        raise SpecError("binary data, expected a CSV text file", source=path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SpecError(f"not UTF-8 text (byte {err.start})", source=path) from None
    rows = list(csv.reader(io.StringIO(text)))
    header = [h.strip() for h in rows[0]] if rows else []
    _check_header(header, path)
    body = [r for r in rows[1:] if any(cell.strip() for cell in r)]
    if not body:
        raise SpecError("trace has a header but no rows", source=path)
    cols = {name: _column(body, header, name, path) for name in header}
    arrival = cols.get("arrival_s")
    if arrival is not None and np.any(np.diff(arrival) < 0):
        raise SpecError("arrival_s must be non-decreasing", source=path, field="arrival_s")
    lengths = [cols[n].astype(np.int64) for n in ("input_tokens", "output_tokens")]
    for arr in (*lengths, *([arrival] if arrival is not None else [])):
        arr.setflags(write=False)
    return TraceData(lengths[0], lengths[1], arrival)


def _check_header(header: list[str], path: str) -> None:
    allowed = ", ".join(TRACE_COLUMNS)
    if not header:
        raise SpecError(f"empty trace; expected a header with {allowed}", source=path)
    for name in header:
        if name not in TRACE_COLUMNS:
            raise SpecError(f"unknown column {name!r}; allowed: {allowed}", source=path)
    if len(set(header)) != len(header):
        raise SpecError("duplicate column in header", source=path)
    for name in TRACE_COLUMNS[:2]:
        if name not in header:
            raise SpecError(f"missing column {name!r}; header must have {allowed}", source=path)


def _column(body: list[list[str]], header: list[str], name: str, path: str) -> FloatArray:
    """One validated column: lengths are integers >= 1, arrival_s finite and >= 0."""
    j = header.index(name)
    out = np.empty(len(body))
    for i, row in enumerate(body):
        where = f"row {i + 2}, column {name}"
        if len(row) != len(header):
            raise SpecError(f"row {i + 2} has {len(row)} cells, header has {len(header)}", source=path)
        try:
            value = float(row[j])
        except ValueError:
            raise SpecError(f"{row[j]!r} is not a number", source=path, field=where) from None
        if name == "arrival_s":
            if not (math.isfinite(value) and value >= 0):
                raise SpecError(f"{row[j]!r} must be a finite time >= 0", source=path, field=where)
        elif not (math.isfinite(value) and value.is_integer() and value >= 1):
            raise SpecError(f"{row[j]!r} must be an integer >= 1", source=path, field=where)
        out[i] = value
    return out
