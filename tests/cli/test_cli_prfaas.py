"""``pdplan transfer --sweep`` and ``pdplan evaluate --prfaas-*`` through the command line."""

from __future__ import annotations

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
