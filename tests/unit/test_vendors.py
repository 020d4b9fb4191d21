"""Prefill and decode GPUs of two vendors (pdplan.serving.checks.vendors): evaluate warns, optimize's Markdown names the
pairing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


def test_cross_vendor_pairing_is_flagged(cli: Cli) -> None:
    argv = ("evaluate", "--prefill-gpu", "b200", "--decode-gpu", "mi300x", "--tp", "8", "--xpyd", "1P1D")
    doc = json.loads(cli(*argv, "--format", "json").out)
    assert any("two vendors" in w for w in doc["warnings"])
    same = json.loads(cli("evaluate", "--format", "json").out)
    assert not any("two vendors" in w for w in same["warnings"])


def test_cross_vendor_plans_are_flagged_in_optimize(cli: Cli) -> None:
    result = cli(
        "optimize", SMALL, "--prefill-gpu", "b200", "--decode-gpu", "mi300x", "--top", "2", "--format", "markdown"
    )
    assert result.code == 0, result.err
    assert "b200 prefill (nvidia) with mi300x decode (amd)" in result.out
