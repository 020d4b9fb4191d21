"""Serving model against published closed forms (docs/published_results.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.cli import run
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing import distserve_md1_ttft_s
from pdplan.serving import build_model, resolve

CATALOG = open_catalog()
GIB = 2.0**30


def _distserve(x: int = 1, pp: int = 1) -> Any:
    """DistServe §3.1 setup: uniform 512-token inputs, FCFS, batch-1 prefill, random routing;
    convention B (prefill streams the first token, as DistServe)."""
    data = {
        "model": "opt-66b",
        "prefill": {"gpu": "a100-sxm-80gb", "tp": 4, "pp": pp, "count": x},
        "decode": {"gpu": "a100-sxm-80gb", "tp": 4},
        "routing": "random",
        "ttft_convention": "B",
        "granularity": "request",
        "workload": {"input_tokens": {"dist": "fixed", "value": 512}, "output_tokens": {"dist": "fixed", "value": 64}},
        "engine": "kernels",  # DistServe's formulas are for kernel time; no engine host terms
    }
    return build_model(resolve(scenario_from_dict(data, source="t", base_dir=Path.cwd()), CATALOG))


@pytest.mark.parametrize("load", [0.1, 0.5, 0.9])
def test_distserve_md1_single_device_exact(load: float) -> None:
    """docs/published_results.md §1.2 (1): Avg_TTFT = D + R·D²/(2(1 − R·D)), exact."""
    m = _distserve()
    d = float(m.prefill.latency_s[0])
    rate = load / d
    ours = float(m.snapshot(np.array([rate])).ttft.mean_s[0])
    assert ours == pytest.approx(float(distserve_md1_ttft_s(rate, d)[0]), rel=1e-12)


def test_distserve_replication_substitutes_rate_over_n() -> None:
    """docs/published_results.md §1.2: N replicas with random routing → R/N per replica, exact."""
    m = _distserve(x=3)
    d = float(m.prefill.latency_s[0])
    rate = 2.1 / d
    ours = float(m.snapshot(np.array([rate])).ttft.mean_s[0])
    assert ours == pytest.approx(float(distserve_md1_ttft_s(rate / 3, d)[0]), rel=1e-12)


def test_distserve_inter_op_general_form() -> None:
    """docs/published_results.md §1.2 (2): Avg_TTFT = D_s + R·D_m²/(2(1 − R·D_m)) with D_s the pass
    latency and D_m the slowest stage (our roofline gives both for PP = 2)."""
    m = _distserve(pp=2)
    d_s, d_m = float(m.prefill.latency_s[0]), float(m.prefill.service_s[0])
    assert d_m < d_s
    rate = 0.7 / d_m
    ours = float(m.snapshot(np.array([rate])).ttft.mean_s[0])
    assert ours == pytest.approx(d_s + rate * d_m**2 / (2 * (1 - rate * d_m)), rel=1e-12)


def test_opt66b_kv_and_bandwidth_via_transfer_command(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/published_results.md §1.7: OPT-66B, 512 tokens → KV ≈ 1.13 GB (1.125 GiB exactly);
    10 rps → 11.25 GiB/s = 90 Gib/s needed to hide the transfer."""
    code = run(["transfer", "--model", "opt-66b", "--tokens", "512", "--link", "ib-hdr", "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bytes"] / GIB == 1.125
    assert doc["bytes"] * 10 * 8 / GIB == 90.0
