"""Readers of benchmark results (pdplan.io.benchmark_results) on the fixtures in tests/data/benchmarks/."""

import json
from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.benchmark_results import (
    RunFlags,
    catalogue_model_name,
    looks_like_benchmark_csv,
    read_benchmark_csv,
    read_benchmark_json,
    read_benchmark_results,
)
from pdplan.io.catalog import open_catalog

DATA = Path(__file__).parents[1] / "data" / "benchmarks"


def test_csv_rows_in_si_with_optional_and_extra_columns() -> None:
    runs = read_benchmark_csv(DATA / "benchmarks.csv")
    assert [r.concurrency for r in runs] == [1, 16, 64]
    first, second, third = runs
    assert first.ttft_s == pytest.approx(0.025)
    assert first.tpot_s == pytest.approx(0.0065)
    assert (first.isl, first.osl, first.tp, first.pp) == (1024.0, 128.0, 1, 1)
    assert second.dtype == "fp8"
    assert third.dtype == "bf16"
    assert first.extra == {"run": "a"}
    assert first.source.endswith("benchmarks.csv:2")
    assert looks_like_benchmark_csv(DATA / "benchmarks.csv")


def test_vllm_json_with_metadata_needs_no_flags() -> None:
    (run,) = read_benchmark_json(DATA / "vllm_bench_serve.json", RunFlags())
    assert run.engine == "vllm"  # backend "vllm"
    assert (run.gpu, run.tp, run.concurrency, run.num_requests) == ("h100-sxm", 1, 32, 320)
    assert run.isl == pytest.approx(327680 / 320)
    assert run.osl == pytest.approx(40960 / 320)
    assert run.ttft_s == pytest.approx(0.1425)
    assert run.tpot_s == pytest.approx(0.0124)
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert run.from_flags == ()


def test_vllm_json_takes_missing_fields_from_flags_and_says_so() -> None:
    flags = RunFlags(engine="vllm", gpu="h100-sxm", tp=1, osl=128)
    (run,) = read_benchmark_json(DATA / "vllm_bench_serve_no_gpu.json", flags)
    assert (run.engine, run.gpu, run.tp) == ("vllm", "h100-sxm", 1)
    assert set(run.from_flags) == {"engine", "gpu", "tp", "osl"}


@pytest.mark.parametrize("missing", ["gpu", "tp", "engine"])
def test_vllm_json_without_a_needed_field_names_it(missing: str) -> None:
    flags = {"engine": "vllm", "gpu": "h100-sxm", "tp": 1}
    flags.pop(missing)
    with pytest.raises(SpecError, match=rf"vllm_bench_serve_no_gpu.json: {missing}: record 1: .*--{missing}"):
        read_benchmark_json(DATA / "vllm_bench_serve_no_gpu.json", RunFlags(**flags))  # type: ignore[arg-type]


def test_open_loop_run_is_refused() -> None:
    with pytest.raises(SpecError, match=r"max_concurrency: .*open-loop"):
        read_benchmark_json(DATA / "vllm_open_loop.json", RunFlags(gpu="h100-sxm", tp=1, engine="vllm"))


def test_sglang_jsonl_reads_every_record_with_server_info() -> None:
    runs = read_benchmark_json(DATA / "sglang_bench_serving.jsonl", RunFlags(gpu="h100-sxm"))
    assert [r.concurrency for r in runs] == [8, 64]
    assert all(r.engine == "sglang" and r.tp == 2 and r.model == "Qwen/Qwen3-32B" for r in runs)
    assert runs[0].isl == pytest.approx(2048)
    assert runs[0].osl == pytest.approx(256)
    assert runs[1].source.endswith("#2")
    assert runs[0].from_flags == ("gpu",)


def test_mixed_files_in_one_call() -> None:
    runs = read_benchmark_results(
        [DATA / "benchmarks.csv", DATA / "vllm_bench_serve.json", DATA / "sglang_bench_serving.jsonl"],
        RunFlags(gpu="h100-sxm"),
    )
    assert len(runs) == 6


def test_hf_ids_map_to_catalogue_names() -> None:
    names = open_catalog().names("model")
    assert catalogue_model_name("meta-llama/Llama-3.1-8B-Instruct", names) == "llama-3.1-8b"
    assert catalogue_model_name("meta-llama/Meta-Llama-3.1-70B-Instruct", names) == "llama-3.1-70b"
    assert catalogue_model_name("Qwen/Qwen3-32B-FP8", names) == "qwen3-32b"
    assert catalogue_model_name("LLAMA-3.1-8B", names) == "llama-3.1-8b"
    assert catalogue_model_name("org/not-a-model", names) == "org/not-a-model"


CSV_HEADER = "engine,gpu,model,tp,isl,osl,concurrency,ttft_ms,tpot_ms\n"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("engine,gpu,model,tp\nvllm,h100-sxm,x,1\n", r"missing column\(s\) \['isl'"),
        (CSV_HEADER, "no benchmark rows"),
        (
            CSV_HEADER + "vllm,h100-sxm,llama-3.1-8b,1.5,1024,128,8,20,6\n",
            "tp: line 2: tp='1.5' must be a positive integer",
        ),
        (CSV_HEADER + "vllm,h100-sxm,llama-3.1-8b,1,1024,128,8,-20,6\n", "ttft_ms: line 2: .*positive number"),
        (CSV_HEADER + "vllm,h100-sxm,llama-3.1-8b,1,1024,128,8,20,abc\n", "tpot_ms: line 2: .*not a number"),
        (CSV_HEADER.strip() + ",dtype\nvllm,h100-sxm,llama-3.1-8b,1,1024,128,8,20,6,int4\n", "dtype: line 2: .*'bf16'"),
        (CSV_HEADER + ",h100-sxm,llama-3.1-8b,1,1024,128,8,20,6\n", "engine: line 2: "),
    ],
)
def test_bad_csv_is_one_line_naming_file_and_field(tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(SpecError, match=match) as err:
        read_benchmark_csv(path)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(str(path))


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"mean_ttft_ms": 1.0}, "completed: record 1: required field is missing"),
        ("[1, 2]", "record 1: expected a JSON object"),
        ("{not json", "line 1: not JSON"),
        ("", "file is empty"),
    ],
)
def test_bad_json_is_one_line(tmp_path: Path, record: object, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    with pytest.raises(SpecError, match=match):
        read_benchmark_json(path, RunFlags(gpu="h100-sxm", tp=1, engine="vllm"))


def test_a_bad_number_in_the_json_names_the_field(tmp_path: Path) -> None:
    rec = json.loads((DATA / "vllm_bench_serve.json").read_text())
    rec["mean_tpot_ms"] = "fast"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(SpecError, match="mean_tpot_ms: record 1: 'fast' must be a positive number"):
        read_benchmark_json(path, RunFlags())
    rec["mean_tpot_ms"], rec["request_rate"] = 10.0, 5.0
    path.write_text(json.dumps(rec))
    with pytest.raises(SpecError, match=r"request_rate: record 1: request_rate=5\.0; allowed: inf"):
        read_benchmark_json(path, RunFlags())
