"""``pdplan transfer --sweep`` and ``pdplan evaluate --prfaas-*`` through the command line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_transfer_sweep_json(cli: Any) -> None:
    result = cli(
        "transfer", "--model", "qwen3-next-80b-a3b", "--gpu", "h200-sxm", "--tp", "8", "--sweep", "1K,32K", "--format",
        "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [r["tokens"] for r in doc["rows"]] == [1024, 32768]
    row = doc["rows"][1]
    assert row["kv_gbps"] == row["kv_bytes"] * 8 / row["prefill_s"] / 1e9


def test_transfer_sweep_names_the_layout_it_priced(cli: Any) -> None:
    """MiniMax-M2.5's FP8 checkpoint at TP 8: 1536 / 8 = 192 per GPU is 1.5 weight blocks, so its experts run
    expert-parallel (EP 8, pdplan.perf.block_quant); MiMo-V2-Flash's 2048 / 8 = 256 stays a TP split."""
    layouts = {}
    for model in ("minimax-m2.5", "mimo-v2-flash"):
        args = ("--model", model, "--gpu", "h200-sxm", "--tp", "8", "--sweep", "1K", "--format", "json")
        result = cli("transfer", *args)
        assert result.code == 0, result.err
        doc = json.loads(result.out)
        layouts[model] = (doc["weight_dtype"], doc["ep"])
    assert layouts == {"minimax-m2.5": ("fp8", 8), "mimo-v2-flash": ("fp8", 1)}


def test_transfer_needs_tokens_and_link_or_a_sweep(cli: Any) -> None:
    result = cli("transfer", "--model", "opt-66b", "--tokens", "512")
    assert result.code == 2
    assert "--link" in result.err
    assert cli("transfer", "--model", "opt-66b", "--sweep", "1K").code == 2  # --sweep needs --gpu


def test_evaluate_flags_pin_the_threshold(cli: Any) -> None:
    result = cli(
        "evaluate", ROOT / "examples" / "prfaas-h200-h20.yaml", "--prfaas-threshold", "32768", "--prfaas-instances",
        "2", "--format", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    pf = json.loads(result.out)["prfaas"]
    assert (pf["threshold_tokens"], pf["remote_instances"], pf["threshold_searched"]) == (32768.0, 2, False)


def test_transfer_sweep_runs_on_the_papers_hybrids(cli: Any) -> None:
    """Kimi Linear (KDA + MLA) and MiMo-V2-Flash (SWA + GQA): their KV grows by the full layers only, so the KV
    throughput falls from 8K on, and stays far below the dense models' (Table 3's hybrid columns are 1.5-8.3 Gb/s;
    pdplan's roofline, with no framework overhead, is higher in absolute terms)."""
    for model in ("kimi-linear-48b-a3b", "mimo-v2-flash"):
        result = cli(
            "transfer", "--model", model, "--gpu", "h200-sxm", "--tp", "8", "--sweep", "8K,32K,128K", "--format", "csv"
        )  # fmt: skip
        assert result.code == 0, result.err
        gbps = [float(r["kv_gbps"]) for r in csv.DictReader(io.StringIO(result.out))]
        assert gbps[0] > gbps[1] > gbps[2]
        assert max(gbps) < 25.0
