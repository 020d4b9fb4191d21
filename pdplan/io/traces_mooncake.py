"""Mooncake's JSONL request traces with block hashes: a streaming reader into numpy arrays, every line validated.

**Format** (``kvcache-ai/Mooncake``, ``FAST25-release/README.md`` at commit ``3b5a594``, "Trace Format"; the
published traces ``FAST25-release/traces/*.jsonl``, last changed in ``3cca71d``): one JSON object a line,

* ``timestamp``: the request's arrival in milliseconds, relative to the first request;
* ``input_length``, ``output_length``: prompt and output tokens;
* ``hash_ids``: "remapped prefix block hashes. The block size is 512 tokens. Identical hash IDs indicate reusable
  prefix KV cache blocks" (two requests sharing their first 12 ids share a 12·512-token prefix).

**Rules pdplan applies** (a line breaking one is a one-line :class:`~pdplan.errors.SpecError` naming the file, the
line, the field, what was found and what is allowed; docs/reuse_workloads.md §3):

* exactly those four keys; the line must be a JSON object;
* ``timestamp`` a finite number ≥ 0 and non-decreasing down the file (arrivals are replayed in file order, as the
  README says real traces are; every published trace is sorted);
* ``input_length`` and ``output_length`` JSON integers from 1 to :data:`MAX_TRACE_TOKENS` (pdplan's lengths are
  whole tokens ≥ 1, the published traces' minimum is 1; no model's context reaches the ceiling);
* ``hash_ids`` a non-empty list of integers in [0, 2⁶³);
* with a block size B (:func:`check_block_counts`): ``len(hash_ids) == ceil(input_length / B)``: one id per B-token
  block of the prompt, the last block partial. The README's rule (ids name prompt blocks of 512 tokens), and every
  line of the published conversation (12,031) and synthetic (3,993) traces satisfies it exactly.

**Reading** is streaming: the file is read ``BLOCK_BYTES`` at a time, cut at the last newline, and each block's lines
are parsed alone, so neither the JSON text nor its parsed objects are ever held beyond one block. Each block's
columns are appended to numpy buffers grown in place (:class:`_Column`: ``ndarray.resize`` reallocates, which for a
large buffer on Linux remaps its pages instead of copying them), so the read holds about one copy of the arrays it
returns (8 bytes a value) plus one block: measured 1.1× the arrays above the interpreter's baseline for a
1,000,000-line trace (docs/reuse_workloads.md §3.1, ``benchmarks/trace_read_memory.py``). Hash ids come flattened
with offsets (CSR form): request i's ids are ``hash_ids[hash_offsets[i]:hash_offsets[i+1]]``. A read is cached per
file (path, modification time, size).
"""

from __future__ import annotations

import functools
import json
import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from pdplan.errors import SpecError
from pdplan.types import FloatArray, Int64Array

MAX_TRACE_TOKENS = 100_000_000
"""Ceiling on a trace line's token counts: 100x the longest context window of any model in use (1M tokens), so a
corrupt line is named here rather than failing later as an overflow or an out-of-range prompt length."""

KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
_KEY_SET = frozenset(KEYS)
_INF = math.inf
_README = "kvcache-ai/Mooncake FAST25-release/README.md"
BLOCK_BYTES = 1 << 23
"""Bytes read at a time (8 MiB: about 30,000 lines of the published traces)."""
_CANONICAL = re.compile(
    rb'^\{"timestamp": ([0-9]+), "input_length": ([0-9]+), "output_length": ([0-9]+), "hash_ids": \[([0-9, ]+)\]\}\n',
    re.MULTILINE,
)
_INT64_MAX = np.iinfo(np.int64).max
_INT_ONLY = frozenset({int})
_POW10 = 10 ** np.arange(19, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class MooncakeTrace:
    """A validated Mooncake trace as arrays (read-only); ``line_numbers[i]`` is request i's line in the file."""

    arrival_s: FloatArray
    input_tokens: Int64Array
    output_tokens: Int64Array
    hash_offsets: Int64Array
    hash_ids: Int64Array
    line_numbers: Int64Array

    @property
    def requests(self) -> int:
        return int(self.input_tokens.size)

    def block_counts(self) -> Int64Array:
        """Hash ids per request."""
        return np.asarray(np.diff(self.hash_offsets), dtype=np.int64)

    def request_hashes(self, i: int) -> Int64Array:
        """Request i's block ids."""
        return self.hash_ids[self.hash_offsets[i] : self.hash_offsets[i + 1]]


@dataclass(frozen=True, eq=False)
class _Chunk:
    """The columns of a run of lines."""

    timestamp_ms: FloatArray
    input_tokens: Int64Array
    output_tokens: Int64Array
    counts: Int64Array
    hash_ids: Int64Array
    lines: Int64Array


def read_mooncake_trace(path: str | Path) -> MooncakeTrace:
    """Read and validate a Mooncake JSONL trace (module docstring); block counts are checked separately."""
    from pdplan.io.files import check_input_file

    path = Path(path)
    check_input_file(path)
    stat = path.stat()
    return _read_cached(str(path.resolve()), stat.st_mtime_ns, stat.st_size, str(path))


def load_mooncake_trace(path: str | Path, block_tokens: int) -> MooncakeTrace:
    """Read a Mooncake trace and check each request's block count against ``block_tokens``."""
    trace = read_mooncake_trace(path)
    check_block_counts(trace, block_tokens, str(path))
    return trace


def check_block_counts(trace: MooncakeTrace, block_tokens: int, where: str) -> None:
    """Every request has ``ceil(input_length / block_tokens)`` hash ids (module docstring); else a SpecError
    naming the first line that does not."""
    if block_tokens < 1:
        raise SpecError(f"block_tokens must be >= 1, got {block_tokens}", source=where, field="block_tokens")
    expected = (trace.input_tokens + block_tokens - 1) // block_tokens
    counts = trace.block_counts()
    bad = np.flatnonzero(counts != expected)
    if bad.size:
        i = int(bad[0])
        raise SpecError(
            f"{counts[i]} block ids for input_length {trace.input_tokens[i]}; expected ceil({trace.input_tokens[i]} / "
            f"{block_tokens}) = {expected[i]}, one id per {block_tokens}-token block, the last one partial ({_README})",
            source=where,
            field=f"line {trace.line_numbers[i]}, field hash_ids",
        )


@functools.lru_cache(maxsize=2)
def _read_cached(resolved: str, mtime_ns: int, size: int, where: str) -> MooncakeTrace:
    del mtime_ns, size  # part of the cache key only
    columns = {name: _Column(np.float64 if name == "arrival_s" else np.int64) for name in _COLUMNS}
    columns["hash_offsets"].extend(np.zeros(1, dtype=np.int64))
    ids_so_far = 0
    try:
        fh = open(resolved, "rb")  # noqa: SIM115 - the with below closes it; an open error is one line
    except OSError as err:
        raise SpecError(f"cannot read: {err.strerror or err}", source=where) from None
    with fh:
        for chunk in _chunks(fh, where):
            columns["arrival_s"].extend(chunk.timestamp_ms / 1000.0)
            columns["input_tokens"].extend(chunk.input_tokens)
            columns["output_tokens"].extend(chunk.output_tokens)
            columns["hash_offsets"].extend(ids_so_far + np.cumsum(chunk.counts))
            columns["hash_ids"].extend(chunk.hash_ids)
            columns["line_numbers"].extend(chunk.lines)
            ids_so_far += int(chunk.hash_ids.size)
    if columns["line_numbers"].size == 0:
        raise SpecError("trace has no requests (expected one JSON object a line)", source=where)
    return MooncakeTrace(**{name: column.finish() for name, column in columns.items()})


_COLUMNS = ("arrival_s", "input_tokens", "output_tokens", "hash_offsets", "hash_ids", "line_numbers")


class _Column:
    """A numpy column appended to block by block, grown in place to twice its capacity when full.

    ``ndarray.resize`` reallocates the buffer (``PyArray_Resize``, numpy/_core/src/multiarray/shape.c at numpy
    ``0234c4d``): for a large buffer glibc's ``realloc`` remaps its pages (``mremap``) instead of copying them, and
    numpy zero-fills the new capacity only of a writeable array, so the buffer is made read-only while it grows and
    the pages beyond the filled length stay untouched (not resident) until written. A column thus holds about its
    final size in memory, never an old and a new copy at once (where ``realloc`` copies, as for small buffers, the
    peak is briefly both)."""

    def __init__(self, dtype: type[np.float64] | type[np.int64]) -> None:
        self.data = np.empty(1024, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + values.size
        if end > self.data.size:
            self.data.setflags(write=False)  # no zero fill of the new capacity (class docstring)
            self.data.resize(max(end, 2 * self.data.size), refcheck=False)
            self.data.setflags(write=True)
        self.data[self.size : end] = values
        self.size = end

    def finish(self) -> Any:
        """The filled part, read-only (the buffer shrunk to it)."""
        self.data.resize(self.size, refcheck=False)
        self.data.setflags(write=False)
        return self.data


def _chunks(fh: BinaryIO, where: str) -> Iterator[_Chunk]:
    """Blocks of whole lines, each read by the fast path when it is in Mooncake's own layout, else line by line."""
    previous, first_line, rest = 0.0, 1, b""
    while True:
        block = fh.read(BLOCK_BYTES)
        data = rest + block
        if not data:
            return
        cut = data.rfind(b"\n") + 1 if block else len(data)
        if cut == 0:  # one line longer than a block: read on
            rest = data
            continue
        data, rest = data[:cut], data[cut:]
        if not data.endswith(b"\n"):
            data += b"\n"
        n_lines = data.count(b"\n")
        chunk = _canonical(data, n_lines, previous, first_line) or _general(data, previous, first_line, where)
        if chunk.lines.size:
            previous = float(chunk.timestamp_ms[-1])
        first_line += n_lines
        yield chunk


def _canonical(data: bytes, n_lines: int, previous: float, first_line: int) -> _Chunk | None:
    """Lines exactly as Mooncake writes them (``json.dumps`` layout, integer timestamps), read with one regular
    expression and numpy's number parser; None when any line differs, so that :func:`_general` reads the block and
    names the offending line. Accepts only lines :func:`_general` accepts: every line must match, numbers are
    whole (no sign, no leading zero: the digit count of the text equals that of the parsed values), below 2⁶³−1,
    and each id list parses to one number per comma-separated item."""
    rows = _CANONICAL.findall(data)
    if len(rows) != n_lines:
        return None
    ts, inp, out, bodies = zip(*rows, strict=True)
    scalars = _numbers(b",".join(ts + inp + out))
    ids = _numbers(b",".join(bodies))
    if scalars is None or ids is None or scalars.size != 3 * len(rows):
        return None
    counts = np.fromiter(map(bytes.count, bodies, [b","] * len(bodies)), np.int64, len(bodies)) + 1
    ts_ms, inp_t, out_t = scalars.reshape(3, -1)
    digits = len(data) - len(data.translate(None, b"0123456789"))
    if (
        ids.size != int(counts.sum())
        or digits != int(_digits(scalars).sum() + _digits(ids).sum())
        or np.any(scalars == _INT64_MAX)
        or np.any(ids == _INT64_MAX)
        or np.any(inp_t < 1)
        or np.any(out_t < 1)
        or np.any(inp_t > MAX_TRACE_TOKENS)
        or np.any(out_t > MAX_TRACE_TOKENS)
        or ts_ms[0] < previous
        or np.any(np.diff(ts_ms) < 0)
    ):
        return None
    lines = np.arange(first_line, first_line + len(rows), dtype=np.int64)
    return _Chunk(ts_ms.astype(np.float64), inp_t, out_t, counts, ids, lines)


def _numbers(text: bytes) -> Int64Array | None:
    """Comma-separated integers; None if numpy cannot read the text to its end."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return np.asarray(np.fromstring(text, dtype=np.int64, sep=","), dtype=np.int64)
        except (DeprecationWarning, ValueError):
            return None


def _digits(values: Int64Array) -> Int64Array:
    return np.asarray(np.maximum(np.searchsorted(_POW10, values, side="right"), 1), dtype=np.int64)


def _general(data: bytes, previous: float, first_line: int, where: str) -> _Chunk:
    """Every line parsed with :func:`json.loads` and checked (module docstring); the first bad line raises."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + data.count(b"\n", 0, err.start)
        raise SpecError("not UTF-8 text", source=where, field=f"line {line}") from None
    ts_ms: list[float] = []
    inp: list[int] = []
    out: list[int] = []
    counts: list[int] = []
    ids_all: list[int] = []
    lines: list[int] = []
    for number, raw in enumerate(text.split("\n")[:-1], start=first_line):
        if not raw or raw.isspace():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as err:
            raise SpecError(_malformed(err), source=where, field=f"line {number}") from None
        if type(obj) is not dict or obj.keys() != _KEY_SET:
            _bad_keys(obj, number, where)
        ts, n_in, n_out, ids = obj["timestamp"], obj["input_length"], obj["output_length"], obj["hash_ids"]
        _check_fields(obj, number, where, previous)
        if not set(map(type, ids)) <= _INT_ONLY:
            _bad_ids(ids, number, where)
        previous = ts
        ts_ms.append(ts)
        inp.append(n_in)
        out.append(n_out)
        counts.append(len(ids))
        ids_all.extend(ids)
        lines.append(number)
    line_numbers = np.asarray(lines, dtype=np.int64)
    count_arr = np.asarray(counts, dtype=np.int64)
    return _Chunk(
        np.asarray(ts_ms, dtype=np.float64),
        np.asarray(inp, dtype=np.int64),
        np.asarray(out, dtype=np.int64),
        count_arr,
        _ids_array(ids_all, count_arr, line_numbers, where),
        line_numbers,
    )


def _ids_array(ids: list[int], counts: Int64Array, lines: Int64Array, where: str) -> Int64Array:
    """The ids as int64; an id outside [0, 2⁶³) names its line."""
    try:
        arr = np.asarray(ids, dtype=np.int64)
    except OverflowError:
        arr = np.asarray([v if -(2**63) <= v < 2**63 else -1 for v in ids], dtype=np.int64)
    bad = np.flatnonzero(arr < 0)
    if bad.size:
        i = int(np.searchsorted(np.cumsum(counts), bad[0], side="right"))
        raise SpecError(
            f"block id {ids[int(bad[0])]!r} is not an integer in [0, 2^63)",
            source=where,
            field=f"line {lines[i]}, field hash_ids",
        )
    return arr


# ------------------------------------------------------------------------------------------- messages
def _malformed(err: ValueError) -> str:
    detail = getattr(err, "msg", None)
    column = getattr(err, "colno", None)
    where = f" at column {column}" if column is not None else ""
    return f"malformed JSON ({detail or err}{where}); expected one JSON object a line"


def _bad_keys(obj: Any, number: int, where: str) -> None:
    line = f"line {number}"
    if not isinstance(obj, dict):
        raise SpecError(f"expected a JSON object, got {type(obj).__name__}", source=where, field=line)
    missing = [k for k in KEYS if k not in obj]
    if missing:
        raise SpecError(
            f"missing field; each line needs {', '.join(KEYS)}", source=where, field=f"{line}, field {missing[0]}"
        )
    unknown = sorted(set(obj) - _KEY_SET)
    raise SpecError(f"unknown field; allowed: {', '.join(KEYS)}", source=where, field=f"{line}, field {unknown[0]}")


def _check_fields(obj: dict[str, Any], number: int, where: str, previous: float) -> None:
    """Raise for the first scalar field or id list that breaks the rules (module docstring)."""

    def fail(name: str, message: str) -> None:
        raise SpecError(f"{obj[name]!r} {message}", source=where, field=f"line {number}, field {name}")

    ts = obj["timestamp"]
    if type(ts) not in (int, float) or not 0 <= ts < _INF:
        fail("timestamp", "must be a finite time in ms >= 0")
    if ts < previous:
        fail("timestamp", f"is before the previous line's {previous!r} ms; timestamps must be non-decreasing")
    for name in ("input_length", "output_length"):
        value = obj[name]
        if type(value) is not int or value < 1:
            fail(name, "must be an integer >= 1 (tokens)")
        if value > MAX_TRACE_TOKENS:
            fail(name, f"must be at most {MAX_TRACE_TOKENS:,} tokens (longer than any model's context)")
    ids = obj["hash_ids"]
    if type(ids) is not list or not ids:
        fail("hash_ids", "must be a non-empty list of block ids (one per prompt block)")


def _bad_ids(ids: list[Any], number: int, where: str) -> None:
    bad = next(v for v in ids if type(v) is not int or not 0 <= v < 2**63)
    raise SpecError(
        f"block id {bad!r} is not an integer in [0, 2^63)", source=where, field=f"line {number}, field hash_ids"
    )
