"""The prefill compute a prefix cache saves, against its hit rate, checked by the simulator (issue #22 item 6).

A shared-prefix workload on Llama-3.1-8B, H100 1P1D: every prompt is 8,192 tokens, one prefix of f·8,192 tokens
shared by all requests (f = 0, 0.25, 0.5, 0.75: whole 16-token blocks, so the token hit ratio is exactly f once the
prefix is cached), the rest a question of the request's own; constant arrivals at 1 request/s, so each prefill runs
alone on the idle instance. The simulator (pdplan/sim/reuse.py) prices each prefill when it starts, on the hit the
instance's cache gives then, and its prefill pool's busy time per request is compared with:

* **(1 − hit) × the full prefill** (f = 0): the saving is at most proportional. The missed tokens still attend over
  the cached ones (causal attention FLOPs of m new tokens after h cached: ``m·h + m²/2`` against ``L²/2`` in full), and
  a pass has fixed costs (reading the weights), so the busy time is above ``(1 − hit)·full``: measured 1.04, 1.10 and
  1.21 × at hit 0.25, 0.5 and 0.75 (2,048 new tokens or more keep the pass compute-bound). The test asserts the
  bracket ``[1, 1.25] × (1 − hit)·full`` and that the ratio grows with the hit.
* **the closed form** (``evaluate``: hit rates from the Che form of a shared prefix, prefill priced on the missed
  tokens, :func:`pdplan.serving.roles.cached_prefill_perf`): its prefill utilisation at the same rate is the
  simulated one within 0.1 % (the prefix, requested once a second, never leaves an HBM of 440k tokens).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.resolve import resolve
from pdplan.sim.reuse import simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.specs.scenario import Scenario

PROMPT = 8192
RATE = 1.0
SHARES = (0.0, 0.25, 0.5, 0.75)


def _scenario(share: float) -> Scenario:
    prefix = int(share * PROMPT)
    workload = {
        "shared_prefix": {
            "num_prefixes": 1,
            "prefix_tokens": {"dist": "fixed", "value": max(prefix, 1)},  # 1 token: no whole block, nothing shared
            "question_tokens": {"dist": "fixed", "value": PROMPT - prefix},
            "output_tokens": {"dist": "fixed", "value": 4},
        },
        "arrival": {"process": "constant"},
    }
    data = {
        "schema_version": 1,
        "name": f"prefix share {share}",
        "model": "llama-3.1-8b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "link": "ib-ndr",
        "granularity": "layer",
        "workload": workload,
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    return scenario_from_dict(data, source="test", base_dir=Path("."))


@pytest.mark.slow
def test_prefill_saving_against_the_hit_rate() -> None:
    busy, hits, closed = [], [], []
    for share in SHARES:
        sc = _scenario(share)
        model = build_model(resolve(sc, open_catalog()))
        inputs = reuse_inputs(model, RATE)
        res = simulate_reuse(model, sc.workload, inputs.layout, rate_rps=RATE, routing=inputs.routing, n_requests=200)
        prefill = next(p for p in res.run.pools if p.name == "prefill")
        busy.append(prefill.utilisation / RATE)  # seconds of prefill per request
        hits.append(res.token_hit_ratio)
        ev = evaluate(sc, rate=RATE)
        assert ev.operating_point is not None
        closed.append(ev.operating_point.utilisation["prefill"] / RATE)
    assert hits == pytest.approx(list(SHARES), abs=1e-12)
    full = busy[0]
    ratios = [b / ((1.0 - h) * full) for b, h in zip(busy[1:], hits[1:], strict=True)]
    assert all(1.0 <= r <= 1.25 for r in ratios), ratios
    assert ratios == sorted(ratios)
    assert closed == pytest.approx(busy, rel=1e-3)
