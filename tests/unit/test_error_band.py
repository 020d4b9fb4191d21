"""The expected error every report prints (pdplan/evaluation/error_band.py): a plan's band is its engine, mode and
GPU's row of the cross-GPU validation, a GPU without rows takes the band predicted from H100 alone, and every way a
plan lies outside the rows is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pdplan.evaluation import evaluate
from pdplan.evaluation.error_band import expected_error
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import cross_gpu_error
from pdplan.io.scenario import load_scenario, scenario_from_dict
from pdplan.specs.cross_gpu_error import CrossGpuError

DATA = Path(__file__).resolve().parents[2] / "pdplan" / "data" / "cross_gpu_error.yaml"
SMALL = Path(__file__).resolve().parents[1] / "data" / "small_scenario.yaml"


def _band(
    rows: int, fitted_on: str, tpot: tuple[float, float, float], ttft: tuple[float, float, float]
) -> dict[str, Any]:
    keys = ("median_abs_pct", "p90_abs_pct", "signed_median_pct")
    return {
        "rows": rows,
        "fitted_on": fitted_on,
        **{f"tpot_{k}": v for k, v in zip(keys, tpot, strict=True)},
        **{f"ttft_{k}": v for k, v in zip(keys, ttft, strict=True)},
    }


HAND = CrossGpuError(
    schema_version=2,
    source="hand-written for the test",
    bands={
        "trtllm dense h100-sxm": _band(10, "h200-sxm", (5.0, 15.0, -1.0), (25.0, 60.0, 3.0)),
        "trtllm dense h200-sxm": _band(7, "h100-sxm", (25.0, 31.0, 25.0), (80.0, 150.0, 80.0)),
    },
    coverage={
        "trtllm dense": {
            "versions": ["1.0.0rc3", "?"],
            "families": ["llama", "qwen3"],
            "models": ["llama-3.1-8b", "qwen3-32b"],
            "gpus": ["h100-sxm", "h200-sxm"],
        }
    },
)


def test_measured_gpu_takes_its_own_band() -> None:
    err = expected_error("trtllm", "1.0.0rc3", "dense", "llama", ("h100-sxm",), data=HAND)
    assert (err.band_gpu, err.fitted_on, err.rows) == ("h100-sxm", "h200-sxm", 10)
    assert err.tpot is not None
    assert err.ttft is not None
    assert (err.tpot.median_abs_pct, err.tpot.p90_abs_pct, err.tpot.signed_median_pct) == (5.0, 15.0, -1.0)
    assert (err.ttft.median_abs_pct, err.ttft.p90_abs_pct, err.ttft.signed_median_pct) == (25.0, 60.0, 3.0)
    assert err.outside == ()
    assert err.lines() == [
        "expected error: trtllm dense on H100, cross-GPU over 10 runs: TPOT 5 % median (90 % of runs within 15 %; "
        "bias -1 %), TTFT 25 % median (90 % of runs within 60 %; bias +3 %) (bias +: priced slower than measured); "
        "goodput not validated directly (follows TTFT/TPOT through the SLO)"
    ]


def test_unmeasured_gpu_family_and_version_are_named() -> None:
    err = expected_error("trtllm", "1.2.0", "dense", "qwen2", ("b200",), data=HAND)
    assert err.band_gpu == "h200-sxm"  # the band predicted from H100 alone, as the shipped profiles were fitted
    assert err.tpot is not None
    assert err.tpot.median_abs_pct == 25.0
    assert err.outside == (
        "model family qwen2 never checked on trtllm dense (llama, qwen3 were)",
        "trtllm 1.2.0 not in the validation rows (1.0.0rc3)",
        "GPU b200: no measured runs on it validated, band of H200 predicted from H100 shown",
    )
    assert len(err.lines()) == 2
    assert err.lines()[1].startswith("outside validation: model family qwen2")


def test_borrowed_table_and_mixed_gpus_take_the_widest_band() -> None:
    err = expected_error("trtllm", "1.0.0rc3", "dense", "llama", ("h100-sxm", "h100-nvl"), ("h100-nvl",), HAND)
    assert err.band_gpu == "h200-sxm"  # 25 + 80 against H100's 5 + 25
    assert err.outside == ("GPU h100-nvl: its kernel table borrowed, band of H200 predicted from H100 shown",)
    assert "on H200, the widest of the plan's GPUs" in err.lines()[0]


def test_mode_without_rows_has_no_band() -> None:
    err = expected_error("trtllm", "1.0.0rc3", "disagg", "llama", ("h100-sxm",), data=HAND)
    assert (err.tpot, err.ttft, err.band_gpu, err.rows) == (None, None, None, 0)
    assert err.outside == ("no trtllm disagg runs in the validation rows: the error is not known",)
    doc = err.to_document()
    assert doc["tpot"] is None
    assert doc["outside_validation"] == list(err.outside)
    assert "no direct validation" in doc["goodput"]


def test_kernels_profile_is_not_validated() -> None:
    err = expected_error("none", "kernel tables", "dense", "llama", ("h100-sxm",), data=HAND)
    assert err.tpot is None
    assert err.outside == ("engine profile without an engine (kernel tables only): no end-to-end validation",)


def test_packaged_file_matches_its_own_rows() -> None:
    """The packaged bands, read back by hand from the YAML: trtllm dense on H200 (fitted on H100)."""
    raw = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    band = raw["bands"]["trtllm dense h200-sxm"]
    err = expected_error("trtllm", "1.0.0rc3", "dense", "llama", ("h200-sxm",))
    assert err.tpot is not None
    assert err.ttft is not None
    assert err.fitted_on == "h100-sxm" == band["fitted_on"]
    assert err.tpot.median_abs_pct == band["tpot_median_abs_pct"]
    assert err.ttft.signed_median_pct == band["ttft_signed_median_pct"]
    assert "qwen3" in raw["coverage"]["trtllm dense"]["families"]
    assert "vllm disagg" not in raw["coverage"]  # vLLM disaggregated runs are not priced (docs/cross_gpu_accuracy.md)
    assert cross_gpu_error().coverage["trtllm dense"].families == tuple(raw["coverage"]["trtllm dense"]["families"])


def test_evaluate_carries_the_block(tmp_path: Path) -> None:
    """A colocated TensorRT-LLM Llama plan on H100 gets trtllm dense on H100; an OPT model's family is named."""
    spec: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "workload": {"input_tokens": {"dist": "fixed", "value": 512}, "output_tokens": {"dist": "fixed", "value": 64}},
        "engine": "trtllm",
    }
    catalog = open_catalog()
    doc = evaluate(scenario_from_dict(spec, source="test", base_dir=tmp_path), catalog=catalog).to_document()
    block, band = doc["expected_error"], cross_gpu_error().bands["trtllm dense h100-sxm"]
    assert (block["engine"], block["mode"], block["band_gpu"], block["rows"]) == (
        "trtllm",
        "dense",
        "h100-sxm",
        band.rows,
    )
    assert block["tpot"]["p90_abs_pct"] == band.tpot_p90_abs_pct
    assert block["outside_validation"] == []
    other = evaluate(scenario_from_dict({**spec, "model": "opt-13b"}, source="t", base_dir=tmp_path), catalog=catalog)
    assert other.expected_error is not None
    assert other.expected_error.outside[0].startswith("model family opt never checked on trtllm dense")
    json.dumps(doc)


def test_small_disaggregated_vllm_plan_says_unknown() -> None:
    ev = evaluate(load_scenario(SMALL))
    assert ev.expected_error is not None
    assert ev.expected_error.tpot is None
    assert ev.expected_error.outside == ("no vllm disagg runs in the validation rows: the error is not known",)


def test_prfaas_names_its_remote_gpu_and_the_missing_rows() -> None:
    ev = evaluate(load_scenario(Path(__file__).resolve().parents[2] / "examples" / "prfaas-h200-h20.yaml"))
    assert ev.expected_error is not None
    assert ev.expected_error.gpus == ("h20", "h200-sxm")  # local xPyD, then the remote prefill cluster
    assert ev.expected_error.outside[0] == (
        "PrfaaS (prefill on a remote cluster over a cross-datacenter link): no validation rows"
    )


VERSIONED = CrossGpuError(
    schema_version=2,
    source="hand-written for the test",
    bands={
        # the engine's pooled bands: 0.5.1 rows (H100 only) and 0.5.9 rows (both GPUs) together
        "sglang dense h100-sxm": {
            **_band(12, "h200-sxm", (6.0, 9.0, 1.0), (14.0, 30.0, -2.0)),
            "fitted_versions": ["0.5.9"],
        },
        "sglang dense h200-sxm": {
            **_band(5, "h100-sxm", (30.0, 40.0, -30.0), (200.0, 300.0, 200.0)),
            "fitted_versions": ["0.5.9"],
        },
        # per profile version: 0.5.1's 10 H100 rows, fitted on the 0.5.9 H200 rows (cross-version)
        "sglang@0.5.1 dense h100-sxm": {
            **_band(10, "h200-sxm", (5.0, 8.0, 1.0), (12.0, 25.0, -1.0)),
            "fitted_versions": ["0.5.9"],
        },
        "sglang@0.5.9 dense h100-sxm": {
            **_band(2, "h200-sxm", (8.0, 19.0, 8.0), (86.0, 94.0, -86.0)),
            "fitted_versions": ["0.5.9"],
        },
        "sglang@0.5.9 dense h200-sxm": {
            **_band(5, "h100-sxm", (30.0, 40.0, -30.0), (200.0, 300.0, 200.0)),
            "fitted_versions": ["0.5.9"],
        },
    },
    coverage={
        "sglang dense": {
            "versions": ["0.5.1", "0.5.9"],
            "families": ["llama"],
            "models": ["llama-3.1-8b"],
            "gpus": ["h100-sxm", "h200-sxm"],
        }
    },
)


def test_a_version_takes_its_own_band_and_names_cross_version_fits() -> None:
    """sglang 0.5.1 on H100 takes its profile's 10-row band (not the pooled 12), whose terms were fitted on 0.5.9
    runs: the words say so; 0.5.9 on H100 takes its own 2 rows, fitted on its own version (no such words)."""
    old = expected_error("sglang", "0.5.1", "dense", "llama", ("h100-sxm",), data=VERSIONED)
    assert (old.rows, old.band_version, old.fitted_versions) == (10, "0.5.1", ("0.5.9",))
    assert old.ttft is not None
    assert old.ttft.median_abs_pct == 12.0
    assert old.outside == ()
    assert old.lines()[0].startswith(
        "expected error: sglang 0.5.1 dense on H100, cross-GPU over 10 runs, terms fitted on H200 runs of other "
        "versions (0.5.9): TPOT 5 % median"
    )
    new = expected_error("sglang", "0.5.9", "dense", "llama", ("h100-sxm",), data=VERSIONED)
    assert (new.rows, new.band_version) == (2, "0.5.9")
    assert new.lines()[0].startswith("expected error: sglang 0.5.9 dense on H100, cross-GPU over 2 runs: TPOT 8 %")
    doc = old.to_document()
    assert (doc["band_version"], doc["fitted_versions"]) == ("0.5.1", ["0.5.9"])


def test_a_version_without_a_band_on_its_gpu_gets_the_pooled_one_with_a_note() -> None:
    """0.5.1 has no H200 rows: the pooled H200 band (0.5.9's rows), and a note that it is other versions'."""
    err = expected_error("sglang", "0.5.1", "dense", "llama", ("h200-sxm",), data=VERSIONED)
    assert (err.band_gpu, err.rows, err.band_version) == ("h200-sxm", 5, None)
    assert err.outside == ("no sglang 0.5.1 dense runs on H200: other versions' band",)
    # an unknown version has no bands of its own: the pooled band, and only the coverage note
    other = expected_error("sglang", "0.5.4", "dense", "llama", ("h100-sxm",), data=VERSIONED)
    assert (other.rows, other.band_version) == (12, None)
    assert other.outside == ("sglang 0.5.4 not in the validation rows (0.5.1, 0.5.9)",)


def test_an_unmeasured_gpu_takes_its_versions_transfer_band() -> None:
    """B200 on 0.5.9: the 0.5.9 band predicted from H100 alone; on 0.5.1 (no band fitted on H100) the pooled one."""
    err = expected_error("sglang", "0.5.9", "dense", "llama", ("b200",), data=VERSIONED)
    assert (err.band_gpu, err.band_version, err.rows) == ("h200-sxm", "0.5.9", 5)
    old = expected_error("sglang", "0.5.1", "dense", "llama", ("b200",), data=VERSIONED)
    assert (old.band_gpu, old.band_version, old.rows) == ("h200-sxm", None, 5)


def test_old_files_without_fitted_versions_still_load() -> None:
    assert HAND.bands["trtllm dense h100-sxm"].fitted_versions is None
    err = expected_error("trtllm", "1.0.0rc3", "dense", "llama", ("h100-sxm",), data=HAND)
    assert (err.fitted_versions, err.band_version) == ((), None)


def test_band_keys_say_whose_band_it_is() -> None:
    """The key tells a version's own band from the pooled one even where their figures are equal (0.5.9 on H200)."""
    assert VERSIONED.band_key("sglang", "dense", "h200-sxm", "0.5.9") == "sglang@0.5.9 dense h200-sxm"
    assert VERSIONED.band_key("sglang", "dense", "h200-sxm", "0.5.1") == "sglang dense h200-sxm"
    assert VERSIONED.band_key("sglang", "dense", "b200", "0.5.9") is None
    assert VERSIONED.transfer_key("sglang", "dense", version="0.5.9") == "sglang@0.5.9 dense h200-sxm"
    assert VERSIONED.transfer_key("sglang", "dense", version="0.5.1") == "sglang dense h200-sxm"
    assert VERSIONED.transfer_key("vllm", "dense") is None
