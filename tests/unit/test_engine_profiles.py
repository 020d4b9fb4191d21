"""Engine profiles: the packaged YAMLs load, memory classes, the memory basis and the KV admission follow their
sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.engines import load_engine, packaged_engine_names
from pdplan.specs.engine import Sourced

GIB = 2**30
CATALOG = open_catalog()


def test_packaged_profiles_load_with_versions() -> None:
    assert packaged_engine_names() == ["kernels", "sglang", "sglang-0.5.9", "trtllm", "vllm", "vllm-0.18"]
    for name in packaged_engine_names():
        profile = load_engine(name)
        assert profile.name == name
        assert profile.version


def test_vllm_memory_classes_exclude_a100() -> None:
    limits = load_engine("vllm").limits
    h100 = limits.for_gpu("h100-sxm", 80 * GIB)
    a100 = limits.for_gpu("a100-sxm-80gb", 80 * GIB)
    assert (h100.max_batched_tokens, h100.max_seqs) == (8192, 1024)
    assert (a100.max_batched_tokens, a100.max_seqs) == (2048, 256)


def test_sglang_051_reserve_tiers_by_hand() -> None:
    # SGLang 0.5.1 server_args.py: round((gpu_mem - reserved)/gpu_mem, 3), reserved (9.5 + tp/2) GiB below 90 GiB,
    # (12 + tp/2) GiB below 160 GiB, 32 GiB above, + 4 GiB with DP attention
    kv = load_engine("sglang").kv_memory
    assert kv.usable_fraction(80 * GIB, chunk_tokens=8192, graph_seqs=256, gpus=1) == round(70 / 80, 3)
    assert kv.usable_fraction(80 * GIB, chunk_tokens=8192, graph_seqs=256, gpus=8) == round((80 - 13.5) / 80, 3)
    dp = kv.usable_fraction(80 * GIB, chunk_tokens=8192, graph_seqs=256, gpus=1, dp_attention=True)
    assert dp == round((80 - 14) / 80, 3)
    assert kv.usable_fraction(140 * GIB, chunk_tokens=8192, graph_seqs=256, gpus=2) == round((140 - 13) / 140, 3)
    b200 = 183359 * 2**20
    assert kv.usable_fraction(b200, chunk_tokens=16384, graph_seqs=512, gpus=4) == round(1 - 32768 / 183359, 3)
    assert not kv.workspace_in_budget  # the fraction holds weights + KV; activations sit in the reserve


def test_sglang_general_reserve_formula_still_reads() -> None:
    # the later rule (sglang PR #10975), for a user's profile of a newer SGLang: 512 MiB + 1.5 MiB x 8192
    # + 2 MiB x 256 + 1/8 GiB = 13.125 GiB of 80 GiB
    kv = load_engine("sglang").kv_memory.model_copy(
        update={
            "reserve_tiers": [],
            "reserve_base_bytes": 512 * 2**20,
            "reserve_per_chunk_token_bytes": 1.5 * 2**20,
            "reserve_min_chunk_tokens": 2048,
            "reserve_per_graph_seq_bytes": 2 * 2**20,
            "reserve_per_gpu_bytes": GIB / 8,
            "reserve_floor_bytes": 10 * GIB,
            "reserve_floor_above_bytes": 60e9,
        }
    )
    frac = kv.usable_fraction(80 * GIB, chunk_tokens=8192, graph_seqs=256, gpus=1)
    assert frac == round((80 - 13.125) / 80, 3)


def test_reserve_tiers_need_a_catch_all(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "pdplan" / "data" / "engines" / "sglang.yaml").read_text()
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace("    - {reserve_bytes: 34359738368}", ""))
    with pytest.raises(SpecError, match="last reserve tier"):
        load_engine(path)


def test_measured_sglang_run_on_b200_is_not_refused() -> None:
    """DeepSeek-R1 FP8 at TP4 on B200 under SGLang ran (issue 23), launched with --mem-fraction-static 0.89
    (InferenceMAX's B200 DSR1 command, github.com/jyothisambolu/InferenceMAX README): 0.89 of the 179.06 GiB the
    driver exposes holds the 156.7 GiB of weights per GPU and a KV pool; the workspace is in SGLang's reserve."""
    from pdplan.evaluation import evaluate
    from pdplan.io.scenario import scenario_from_dict

    scenario = {
        "schema_version": 1,
        "name": "dsr1-b200-sglang",
        "model": "deepseek-r1",
        "mode": "colocated",
        "colocated": {"gpu": "b200", "tp": 4, "count": 1},
        "engine": "sglang",
        "gpu_memory_utilization": 0.89,
        "dtype": "fp8",
        "kv_dtype": "fp8",
        "workload": {
            "input_tokens": {"dist": "fixed", "value": 1024},
            "output_tokens": {"dist": "fixed", "value": 1024},
        },
        "slo": {"ttft": "2s", "tpot": "100ms", "percentile": 90, "attainment": 0.9},
    }
    doc = evaluate(scenario_from_dict(scenario, source="test", base_dir=Path.cwd()), rate=1.0).to_document()
    assert doc["goodput_rps"] > 1.0
    assert CATALOG.gpu("b200").memory_bytes == 183359 * 2**20


def test_step_and_request_overheads_by_hand() -> None:
    over = load_engine("vllm").overheads
    # 64 layers, TP 1: only the per-step constant (launch gaps and collectives are 0 in the shipped profile)
    assert over.step_overhead_s(64, 1) == pytest.approx(over.step_s.value)
    # request: 5 ms (unfitted since issue #23) + 4.096 x 2 ms; no per-layer dispatch term in the shipped profile
    assert over.request_overhead_s(64, 4096) == pytest.approx(0.005 + 0.008192)
    # with AIConfigurator's 0.8 ms per layer: + 64 x 0.8 ms
    per_layer = over.model_copy(update={"request_s_per_layer": Sourced(value=0.0008, source="test")})
    assert per_layer.request_overhead_s(64, 4096) == pytest.approx(0.005 + 0.0512 + 0.008192)


def test_engine_by_path_and_from_hardware_db(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "pdplan" / "data" / "engines" / "vllm.yaml").read_text()
    own = tmp_path / "engines"
    own.mkdir()
    (own / "myvllm.yaml").write_text(text.replace("name: vllm", "name: myvllm"))
    catalog = open_catalog([tmp_path])
    assert catalog.engine("MyVllm").name == "myvllm"
    assert catalog.engine(str(own / "myvllm.yaml")).name == "myvllm"
    with pytest.raises(SpecError, match="unknown engine"):
        catalog.engine("vlm2")


def test_bad_profile_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    text = (Path(__file__).parents[2] / "pdplan" / "data" / "engines" / "vllm.yaml").read_text()
    path.write_text(text.replace("fraction: 0.9", "fraction: 1.5"))
    with pytest.raises(SpecError, match=r"bad.yaml: kv_memory.fraction"):
        load_engine(path)


def test_evaluate_names_the_engine_and_reports_the_benchmark() -> None:
    from pdplan.evaluation import evaluate
    from pdplan.io.scenario import scenario_from_dict

    sc = scenario_from_dict(
        {
            "model": "llama-3.1-8b",
            "mode": "colocated",
            "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 1, "scheduler": "chunked"},
            "workload": {
                "input_tokens": {"dist": "fixed", "value": 512},
                "output_tokens": {"dist": "fixed", "value": 64},
            },
            "engine": "sglang",
        },
        source="test",
        base_dir=Path.cwd(),
    )
    doc = evaluate(sc, concurrency=8, requests=80, warmup=8).to_document()
    assert doc["engine"] == {
        "name": "sglang",
        "version": "0.5.1.post1",
        "source": "pdplan/data/engines/sglang.yaml",
        "engine": "sglang",
    }
    loop = doc["closed_loop"]
    assert (loop["requests"], loop["warmup"], loop["effective_concurrency"]) == (80, 8, 8)
    assert doc["ttft_s"]["mean"] == loop["mean_ttft_s"] >= loop["request_overhead_s"] > 0.0
    with pytest.raises(SpecError, match="--concurrency"):
        evaluate(sc, requests=10)


def test_vllm_profiles_allocate_kv_on_demand() -> None:
    for name in ("vllm", "vllm-0.18"):
        assert CATALOG.engine(name).scheduling.kv_admission == "on_demand"
    assert CATALOG.engine("trtllm").scheduling.kv_admission == "reserve"


@pytest.mark.parametrize(
    ("key", "version"), [("vllm@0.12", "0.12.0"), ("vllm@0.18", "0.18.0"), ("VLLM@0.18.0", "0.18.0")]
)
def test_engine_at_version_picks_that_profile(key: str, version: str) -> None:
    profile = load_engine(key)
    assert (profile.engine, profile.version) == ("vllm", version)


@pytest.mark.parametrize(("key", "needle"), [("vllm@0.99", "no profile matches"), ("vllm@0", "several profiles")])
def test_engine_at_unknown_version_lists_the_versions(key: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle) as caught:
        load_engine(key)
    assert "vllm@0.12.0, vllm@0.18.0" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "name", "version"),
    [
        ("sglang", "sglang", "0.5.1.post1"),
        ("sglang@0.5.1", "sglang", "0.5.1.post1"),
        ("sglang@0.5.9", "sglang-0.5.9", "0.5.9"),
        ("SGLANG@0.5.9", "sglang-0.5.9", "0.5.9"),
    ],
)
def test_sglang_at_version_picks_that_profile(key: str, name: str, version: str) -> None:
    profile = load_engine(key)
    assert (profile.name, profile.engine, profile.version) == (name, "sglang", version)


def test_sglang_at_a_shared_prefix_lists_both_versions() -> None:
    with pytest.raises(SpecError, match="several profiles") as caught:
        load_engine("sglang@0.5")
    assert "sglang@0.5.1.post1, sglang@0.5.9" in str(caught.value)


MIB = 2**20


@pytest.mark.parametrize(
    ("memory_mib", "chunk", "graph", "gpus", "dp", "fraction"),
    [
        # H100 TP1: 512 + 1.5 x 8192 + 2 x 256 + 1024/8 = 13440 MiB; (81920 - 13440)/81920 = 0.83594
        (81920, 8192, 256, 1, False, 0.836),
        # H200 (134468.08 MiB) TP8: 512 + 12288 + 512 + 1024 = 14336 MiB; 120132.08/134468.08 = 0.89339
        (134468.0786, 8192, 256, 8, False, 0.893),
        # the same with attention DP: + 18432 MiB = 32768 MiB; 101700.08/134468.08 = 0.75631
        (134468.0786, 8192, 256, 8, True, 0.756),
        # a 2048-token chunk on 80 GiB: 512 + 3072 + 512 + 128 = 4224 MiB, below the 10 GiB floor; 71680/81920 = 0.875
        (81920, 2048, 256, 1, False, 0.875),
        # 48 GiB, no floor (not above 60 GiB): 512 + 6144 + 64 + 128 = 6848 MiB; 42304/49152 = 0.86068
        (49152, 4096, 32, 1, False, 0.861),
    ],
)
def test_sglang_059_reserve_is_pr_10975_formula(
    memory_mib: float, chunk: int, graph: int, gpus: int, dp: bool, fraction: float
) -> None:
    memory = CATALOG.engine("sglang-0.5.9").kv_memory
    got = memory.usable_fraction(memory_mib * MIB, chunk_tokens=chunk, graph_seqs=graph, gpus=gpus, dp_attention=dp)
    assert got == fraction
