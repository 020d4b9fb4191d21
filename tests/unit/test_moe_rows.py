"""The TensorRT-LLM disaggregated DeepSeek rows of ``benchmarks/moe_rows.py``: the decode seats, by hand.

AIConfigurator's benchmark rule plugin (``rule_plugin/benchmark/trtllm.rule``) runs each decode worker at
``max_batch_size`` = the CSV's ``decode_batch_size`` and the benchmark at C = workers × that batch; the scenario of
such a row caps the decode batch there (``max_num_seqs``) so the step law is fitted over the batches the worker runs.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
FIELDS = [
    "id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode", "isl",
    "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
    "moe_tp_size", "moe_ep_size", "prefill_batch_size", "prefill_num_workers", "prefill_tp_size", "prefill_pp_size",
    "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size", "decode_batch_size",
    "decode_num_workers", "decode_tp_size", "decode_pp_size", "decode_attention_dp_size", "decode_moe_tp_size",
    "decode_moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms",
]  # fmt: skip


def _moe_rows(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # moe_rows imports its sibling client_connections
    monkeypatch.delitem(sys.modules, "moe_rows", raising=False)
    import moe_rows

    return moe_rows


def _row(rid: str, backend: str, model: str, c: int, ttft: str, **roles: str) -> dict[str, str]:
    base = dict.fromkeys(FIELDS, "")
    base.update(
        id=rid,
        silicon_data_source=f"silicon_concurrency={c}; measured=2026-02-08T00:00:00.000Z",
        backend=backend,
        backend_version="0.8.1.post3",
        model_path=model,
        system="h100_sxm",
        precision="fp8",
        mode="disagg",
        isl="1024",
        osl="1024",
        gemm_quant_mode="fp8",
        moe_quant_mode="fp8",
        prefill_tp_size="16",
        prefill_attention_dp_size="1",
        prefill_moe_ep_size="16",
        decode_tp_size="16",
        decode_attention_dp_size="1",
        decode_moe_ep_size="16",
        silicon_ttft_ms=ttft,
        silicon_tpot_ms="14.0",
    )
    base.update(roles)
    return base


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return path


CFG = {
    "prefill_batch_size": "1",
    "prefill_num_workers": "1",
    "prefill_tp_size": "1",
    "prefill_attention_dp_size": "16",
    "decode_batch_size": "2",
    "decode_num_workers": "3",
}


def test_decode_seats_only_for_trtllm_disagg_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    mr = _moe_rows(monkeypatch)
    assert mr.decode_seats(_row("a", "trtllm", "deepseek-ai/DeepSeek-V3", 6, "1", **CFG)) == 2
    assert mr.decode_seats(_row("b", "trtllm", "deepseek-ai/DeepSeek-R1", 6, "1")) is None  # no batch recorded
    assert mr.decode_seats(_row("c", "sglang", "deepseek-ai/DeepSeek-R1", 6, "1", **CFG)) is None
    assert mr.decode_seats({**_row("d", "trtllm", "deepseek-ai/DeepSeek-V3", 6, "1", **CFG), "mode": "agg"}) is None


def test_r1_row_takes_seats_of_the_cfg_row_with_its_measurement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mr = _moe_rows(monkeypatch)
    rows = [
        _row("dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494", "trtllm", "deepseek-ai/DeepSeek-V3", 6, "12345", **CFG),
        _row("2026_03_25_r1_c6", "trtllm", "deepseek-ai/DeepSeek-R1", 6, "12345"),  # same measurement: 3 x 2 seats
        _row("2026_03_25_r1_c6_other", "trtllm", "deepseek-ai/DeepSeek-R1", 6, "6909"),  # another run: no deployment
        _row("sglang_c6", "sglang", "deepseek-ai/DeepSeek-R1", 6, "600"),
    ]
    todo, skipped = mr.moe_rows(_write(tmp_path / "rows.csv", rows))
    by_id = {r["id"]: r for r in todo}
    assert [r["id"] for r, _ in skipped] == ["2026_03_25_r1_c6_other"]
    for rid in ("dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494", "2026_03_25_r1_c6"):
        row = by_id[rid]
        # C = decode workers x decode max_batch_size: 6 = 3 x 2 (AIConfigurator's benchmark concurrency)
        assert row["concurrency"] == row["decode"]["count"] * row["decode_seats"] == 6
        assert mr.scenario_dict(row)["max_num_seqs"] == 2
        assert (row["prefill"]["tp"], row["prefill"]["dp"], row["decode"]["tp"]) == (1, 16, 16)
    assert "decode_seats" not in by_id["sglang_c6"]
    assert "max_num_seqs" not in mr.scenario_dict(by_id["sglang_c6"])


def test_seat_cap_reaches_the_decode_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mr = _moe_rows(monkeypatch)
    row = _row("dsr1_cfg", "trtllm", "deepseek-ai/DeepSeek-V3", 6, "12345", **CFG)
    (priced,), _ = mr.moe_rows(_write(tmp_path / "rows.csv", [row]))
    catalog = open_catalog()
    models = {}
    for seats in (2, None):
        spec = mr.scenario_dict({**priced, "decode_seats": seats} if seats else priced)
        if seats is None:
            spec.pop("max_num_seqs", None)
        model = build_model(resolve(scenario_from_dict(spec, source="t", base_dir=tmp_path), catalog))
        assert isinstance(model, DisaggregatedModel)
        models[seats] = model
    # 2 seats per decode worker (TP16, no attention DP), against the profile's 256 without the cap
    assert models[2].decode.max_num_seqs == 2.0
    assert models[None].decode.max_num_seqs == 256.0


def _agg(rid: str, tp: str, moe_tp: str, ep: str, system: str = "h200_sxm") -> dict[str, str]:
    row = _row(rid, "trtllm", "deepseek-ai/DeepSeek-R1", 4, "494.0", mode="agg", system=system)
    row.update(tp_size=tp, moe_tp_size=moe_tp, moe_ep_size=ep, attention_dp_size="1", silicon_tpot_ms="8.58")
    return row


def test_column_scaled_tp64_row_reads_as_its_tp8_twin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The H200 2026-04-06 dump records the 2026-03-25 dump's TP8 EP8 DeepSeek-R1 measurement (same TTFT 494.0 ms,
    TPOT 8.58 ms) as tp_size 64, moe_tp_size 8, moe_ep_size 8: one 8-GPU node cannot hold a TP64 group, so the
    row reads as TP 64 / 8 = 8, the twin's deployment. A TP4 row with MoE TP2 x EP2 (the H100 Qwen3-235B form) and
    a TP16 row without MoE TP keep their tp_size."""
    mr = _moe_rows(monkeypatch)
    rows = [
        _agg("2026_03_25_dsr1_c4", "8", "1", "8"),
        _agg("2026_04_06_dsr1_c4", "64", "8", "8"),
        _agg("h100_tp4_moetp2_ep2", "4", "2", "2", system="h100_sxm"),
        _agg("h200_tp16_ep16", "16", "1", "16"),
    ]
    todo, _ = mr.moe_rows(_write(tmp_path / "rows.csv", rows))
    by_id = {r["id"]: (r["tp"], r["ep"]) for r in todo}
    assert by_id == {
        "2026_03_25_dsr1_c4": (8, 8),
        "2026_04_06_dsr1_c4": (8, 8),
        "h100_tp4_moetp2_ep2": (4, 2),
        "h200_tp16_ep16": (16, 16),
    }
