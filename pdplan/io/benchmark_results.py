"""Readers of closed-loop benchmark results for ``pdplan calibrate``: a CSV, ``vllm bench serve`` result JSON and
SGLang ``bench_serving`` JSONL, each turned into :class:`~pdplan.specs.benchmark.BenchmarkRun` rows.

Formats (field names read from the tools' sources):

* CSV with header ``engine,gpu,model,tp,isl,osl,concurrency,ttft_ms,tpot_ms`` and optional
  ``dtype,kv_dtype,pp,ep,dp,num_requests``; other columns are kept and echoed (docs/architecture.md §4).
* ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``, ``main_async`` and ``benchmark``): one
  object with ``model_id``, ``backend``, ``num_prompts``, ``request_rate`` (``"inf"`` for a closed loop),
  ``max_concurrency``, ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``mean_ttft_ms``,
  ``mean_tpot_ms`` (and medians, percentiles...). ``--metadata KEY=VALUE`` pairs land at the top level, so
  ``--metadata gpu=h100-sxm tp=2 engine=vllm`` records what the file otherwise lacks. ``--append-result`` writes
  one object per line; both are read.
* SGLang ``python -m sglang.bench_serving`` output (``python/sglang/bench_serving.py``, ``benchmark``): one JSON
  object per line with ``backend``, ``dataset_name``, ``request_rate``, ``max_concurrency``, ``random_input_len``,
  ``random_output_len``, ``server_info`` (the server's ``/get_server_info``: ``model_path``, ``tp_size``...),
  ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``mean_ttft_ms``, ``mean_tpot_ms``.

Neither JSON records the GPU, and the vLLM one not the TP size: those (and anything else missing) come from the
command line (:class:`RunFlags`), and each run lists the fields it took from there (``from_flags``). Mean prompt
and output lengths are the file's ``total_input_tokens / completed`` and ``total_output_tokens / completed`` (what
the server really saw, chat templates included); ``--isl``/``--osl`` replace them. A run must be closed-loop
(``max_concurrency`` set, ``request_rate`` infinite): an open-loop run is refused, not reinterpreted.

Every problem is one :class:`~pdplan.errors.SpecError` line naming the file, the field and what is allowed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.files import DEEP_MESSAGE, read_text_file
from pdplan.specs.base import first_error_line
from pdplan.specs.benchmark import BenchmarkRun

CSV_REQUIRED = ("engine", "gpu", "model", "tp", "isl", "osl", "concurrency", "ttft_ms", "tpot_ms")
CSV_OPTIONAL = ("dtype", "kv_dtype", "pp", "ep", "dp", "num_requests")
_INT_FIELDS = ("tp", "concurrency", "pp", "ep", "dp", "num_requests")
_FLOAT_FIELDS = ("isl", "osl")


@dataclass(frozen=True)
class RunFlags:
    """Values from the command line for fields a result file does not record (``None``: not given)."""

    engine: str | None = None
    gpu: str | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    isl: float | None = None
    osl: float | None = None
    dtype: str | None = None
    kv_dtype: str | None = None


def _number(text: str, col: str, where: str, line: int, *, integer: bool) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"line {line}: {col}={text!r} is not a number", source=where, field=col) from None
    if not math.isfinite(value) or value <= 0 or (integer and value != int(value)):
        kind = "a positive integer" if integer else "a positive number"
        raise SpecError(f"line {line}: {col}={text!r} must be {kind}", source=where, field=col)
    return int(value) if integer else value


def _validated(data: dict[str, Any], where: str, line: int, unit: str = "line") -> BenchmarkRun:
    try:
        return BenchmarkRun.model_validate(data)
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(f"{unit} {line}: {message}", source=where, field=field) from None


def read_benchmark_csv(path: Path) -> list[BenchmarkRun]:
    """Rows of a benchmark CSV (module docstring); milliseconds become seconds."""
    where = str(path)
    reader = csv.DictReader(io.StringIO(read_text_file(path)))
    header = [h.strip() for h in reader.fieldnames or []]
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise SpecError(f"line 1: column(s) {repeated} appear more than once; give each column once", source=where)
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise SpecError(f"missing column(s) {missing}; required header: {','.join(CSV_REQUIRED)}", source=where)
    runs = []
    for i, raw in enumerate(reader):
        line = i + 2
        row = {k.strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        data: dict[str, Any] = {"engine": row["engine"], "gpu": row["gpu"], "model": row["model"]}
        for col in (*_INT_FIELDS, *_FLOAT_FIELDS):
            if row.get(col):
                data[col] = _number(row[col], col, where, line, integer=col in _INT_FIELDS)
        for col in ("ttft_ms", "tpot_ms"):
            data[col.replace("_ms", "_s")] = float(_number(row[col], col, where, line, integer=False)) / 1e3
        for col in ("dtype", "kv_dtype"):
            if row.get(col):
                data[col] = row[col].lower()
        known = set(CSV_REQUIRED) | set(CSV_OPTIONAL)
        data["extra"] = {k: v for k, v in row.items() if k not in known}
        runs.append(_validated({**data, "source": f"{where}:{line}"}, where, line))
    if not runs:
        raise SpecError("no benchmark rows after the header", source=where)
    return runs


def _records(path: Path) -> list[dict[str, Any]]:
    """A JSON object, a JSON list of objects, or one object per line (JSONL)."""
    text = read_text_file(path)
    if not text.strip():
        raise SpecError("file is empty, expected benchmark result JSON", source=str(path))
    try:
        whole = json.loads(text)
        items = whole if isinstance(whole, list) else [whole]
    except RecursionError:
        raise SpecError(DEEP_MESSAGE, source=str(path)) from None
    except json.JSONDecodeError:
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise SpecError(f"line {n}: not JSON ({err.msg})", source=str(path)) from None
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise SpecError(f"record {n}: expected a JSON object, got {type(item).__name__}", source=str(path))
    return items


def _field(rec: dict[str, Any], key: str, where: str, n: int) -> Any:
    value = rec.get(key)
    if value is None:
        raise SpecError(f"record {n}: required field is missing", source=where, field=key)
    return value


def _positive(rec: dict[str, Any], key: str, where: str, n: int) -> float:
    value = _field(rec, key, where, n)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"record {n}: {value!r} must be a positive number", source=where, field=key)
    return float(value)


def _closed_loop(rec: dict[str, Any], where: str, n: int) -> int:
    """``max_concurrency`` of a closed-loop run; an open-loop (finite-rate or unbounded) run is refused."""
    if rec.get("max_concurrency") is None:
        raise SpecError(
            f"record {n}: max_concurrency is null (an open-loop run at request_rate={rec.get('request_rate')!r}); "
            "pdplan calibrates closed-loop runs: rerun with --max-concurrency C",
            source=where,
            field="max_concurrency",
        )
    rate = rec.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, float) and math.isinf(rate)):
        raise SpecError(
            f"record {n}: request_rate={rate!r}; allowed: inf (clients send their next request when the last ends)",
            source=where,
            field="request_rate",
        )
    return int(_positive(rec, "max_concurrency", where, n))


_ENGINE_WORDS = (("sglang", "sglang"), ("vllm", "vllm"), ("trt", "trtllm"), ("tensorrt", "trtllm"))


def _engine_of_backend(backend: object) -> str | None:
    """The engine a client ``backend`` word names (``vllm``, ``sglang-oai``, ``trt``...); None for ``openai``."""
    word = str(backend or "").lower()
    return next((engine for prefix, engine in _ENGINE_WORDS if word.startswith(prefix)), None)


def _fill(data: dict[str, Any], flags: RunFlags, where: str, n: int) -> BenchmarkRun:
    """Flags fill what the record lacks (``isl``/``osl`` flags replace the file's means); the run lists which."""
    taken = []
    for f in fields(RunFlags):
        value = getattr(flags, f.name)
        if value is None:
            continue
        if data.get(f.name) is None or f.name in ("isl", "osl"):
            data[f.name] = value
            taken.append(f.name)
    for key in ("engine", "gpu", "model", "tp"):
        if data.get(key) is None:
            raise SpecError(
                f"record {n}: the file does not record it; give --{key.replace('_', '-')} "
                f"(or record it with vllm bench serve --metadata {key}=...)",
                source=where,
                field=key,
            )
    clean = {k: v for k, v in data.items() if v is not None}
    return _validated({**clean, "from_flags": tuple(taken)}, where, n, "record")


def _means(rec: dict[str, Any], where: str, n: int) -> dict[str, Any]:
    completed = _positive(rec, "completed", where, n)
    return {
        "isl": _positive(rec, "total_input_tokens", where, n) / completed,
        "osl": _positive(rec, "total_output_tokens", where, n) / completed,
        "ttft_s": _positive(rec, "mean_ttft_ms", where, n) / 1e3,
        "tpot_s": _positive(rec, "mean_tpot_ms", where, n) / 1e3,
    }


def _metadata_int(value: object, key: str, where: str, n: int) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        raise SpecError(f"record {n}: {value!r} must be a positive integer", source=where, field=key) from None


def vllm_run(rec: dict[str, Any], flags: RunFlags, where: str, n: int) -> BenchmarkRun:
    """One ``vllm bench serve`` result object (module docstring)."""
    data: dict[str, Any] = {
        **_means(rec, where, n),
        "concurrency": _closed_loop(rec, where, n),
        "model": _field(rec, "model_id", where, n),
        "engine": rec.get("engine") or _engine_of_backend(rec.get("backend")),
        "gpu": rec.get("gpu"),
        "tp": _metadata_int(rec.get("tp"), "tp", where, n),
        "pp": _metadata_int(rec.get("pp"), "pp", where, n),
        "dtype": rec.get("dtype"),
        "kv_dtype": rec.get("kv_dtype"),
        "num_requests": rec.get("num_prompts"),
        "source": f"{where}" if n == 1 else f"{where}#{n}",
    }
    return _fill(data, flags, where, n)


def sglang_run(rec: dict[str, Any], flags: RunFlags, where: str, n: int) -> BenchmarkRun:
    """One SGLang ``bench_serving`` JSONL record (module docstring)."""
    info = rec.get("server_info") if isinstance(rec.get("server_info"), dict) else {}
    assert isinstance(info, dict)
    data: dict[str, Any] = {
        **_means(rec, where, n),
        "concurrency": _closed_loop(rec, where, n),
        "model": info.get("model_path") or info.get("served_model_name"),
        "engine": _engine_of_backend(rec.get("backend")),
        "gpu": None,
        "tp": _metadata_int(info.get("tp_size"), "server_info.tp_size", where, n),
        "pp": _metadata_int(info.get("pp_size"), "server_info.pp_size", where, n),
        "source": f"{where}#{n}",
    }
    return _fill(data, flags, where, n)


def _is_sglang(rec: dict[str, Any]) -> bool:
    return "server_info" in rec or "random_input_len" in rec or "total_output_tokens_retokenized" in rec


def read_benchmark_json(path: Path, flags: RunFlags) -> list[BenchmarkRun]:
    """Runs of a ``vllm bench serve`` result JSON or an SGLang ``bench_serving`` JSONL (told apart by their keys)."""
    where = str(path)
    return [
        (sglang_run if _is_sglang(rec) else vllm_run)(rec, flags, where, n)
        for n, rec in enumerate(_records(path), start=1)
    ]


def looks_like_benchmark_csv(path: Path) -> bool:
    """True when a CSV's header names the benchmark columns (``ttft_ms``), not phase measurements."""
    first = read_text_file(path).split("\n", 1)[0]
    return "ttft_ms" in [c.strip() for c in first.split(",")]


def read_benchmark_results(paths: Sequence[Path], flags: RunFlags | None = None) -> list[BenchmarkRun]:
    """Every run of every file: ``.csv`` as the benchmark CSV, anything else as result JSON/JSONL."""
    runs: list[BenchmarkRun] = []
    for path in paths:
        if path.suffix.lower() == ".csv":
            runs += read_benchmark_csv(path)
        else:
            runs += read_benchmark_json(path, flags or RunFlags())
    return runs


_SUFFIXES = re.compile(r"(-(instruct|chat|hf|base|fp8|fp16|bf16|awq|gptq|int4|int8|it))+$")


def catalogue_model_name(name: str, known: Iterable[str]) -> str:
    """The catalogue name for a model as benchmark files write it: a catalogue name, or a Hugging Face id
    (``meta-llama/Llama-3.1-8B-Instruct`` → ``llama-3.1-8b``: the part after ``/``, lower case, without a
    ``meta-`` prefix and ``-Instruct``/``-FP8``-style suffixes). Unmatched names come back as given (the catalogue
    then says it does not know them, or reads them as a path)."""
    names = {n.lower() for n in known}
    text = name.strip()
    if text.lower() in names:
        return text.lower()
    stem = text.rsplit("/", 1)[-1].lower()
    for candidate in (stem, _SUFFIXES.sub("", stem)):
        for variant in (candidate, candidate.removeprefix("meta-")):
            if variant in names:
                return variant
    return text
