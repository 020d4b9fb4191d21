"""``pdplan evaluate --format markdown`` (pdplan.report.evaluate_markdown): a one-deployment review with its sections
and numbers, and the DP / EP of each role of a wide-EP deployment."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


def test_evaluate_markdown_is_a_deployment_review(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "review.md"
    result = cli("evaluate", SMALL, "--rate", "2", "-o", target)
    assert result.code == 0, result.err
    text = target.read_text()
    assert text.startswith("# Deployment review: small\n")
    for heading in ("## Deployment", "## Capacity", "## Operating point", "## Assumptions", "## Method"):
        assert f"\n{heading}\n" in text
    doc = json.loads(cli("evaluate", SMALL, "--rate", "2", "--format", "json").out)
    assert f"{doc['goodput_rps']:.2f} req/s" in text
    assert f"P99 {doc['ttft_s']['p99'] * 1e3:,.1f} ms" in text


def test_evaluate_markdown_names_attention_dp_and_ep(cli: Cli, tmp_path: Path) -> None:
    """A wide-EP deployment's review says DP and EP per role (it printed 'TP1 PP1' only)."""
    target = tmp_path / "review.md"
    args = ("--model", "deepseek-v3", "--gpu", "h200-sxm", "--dtype", "fp8", "--kv-dtype", "fp8", "--xpyd", "1P2D")
    roles = ("--prefill-tp", "8", "--prefill-ep", "8", "--decode-tp", "1", "--decode-dp", "16", "--decode-ep", "16")
    result = cli("evaluate", *args, *roles, "-o", target)
    assert result.code == 0, result.err
    text = target.read_text()
    assert "| prefill | 1x h200-sxm TP8 PP1 EP8 |" in text
    assert "| decode | 2x h200-sxm TP1 PP1 DP16 EP16 |" in text
