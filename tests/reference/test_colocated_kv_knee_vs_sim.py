"""The OPT-13B colocated pick of ``examples/opt-13b-a100-distserve.yaml`` (1x a100-sxm-80gb TP2 chunked, TTFT-bound
at P90 = 250 ms next to its decode-KV knee; docs/accuracy.md §6 "A KV knee the lower TTFT uncovered") against the
simulator, under vLLM (growing KV, preemption with recompute in the simulator) and TensorRT-LLM (reserved KV).

Measured on the shared 2-core machine with 100,000 requests, seed 0 (`pdplan simulate --goodput`): vLLM closed form
9.610 req/s, simulator 9.219 (+4.2 %); TensorRT-LLM 8.967 against 9.164 (−2.1 %). Both closed-form goodputs are
TTFT-bound below their comfortable KV limits (9.634 and 9.396 req/s); the vLLM miss is the chunked TTFT near this
load, not the KV (with unlimited KV the simulator's P90 TTFT is 261–268 ms at 9.3 req/s and 290–301 ms at 9.61 over
three seeds, the closed form's 231 and 248 ms). A goodput bisection costs about eight 100,000-request runs, so the
test brackets it instead: the simulator meets the SLO at 6 % below the closed-form goodput and misses it at 6 %
above, or just below the closed form's stability limit where that comes first (100,000 requests each: at 10,000
the P90 TTFT near this knee ranges 0.30–11.6 s over seeds).
"""

from __future__ import annotations

import pytest
from support.opt13b_colocated import opt13b_colocated

from pdplan.evaluation import evaluate
from pdplan.sim.compare import simulate_scenario

REQUESTS = 100_000
TOLERANCE = 0.06


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_simulator_goodput_within_six_percent_of_the_closed_form(engine: str) -> None:
    sc = opt13b_colocated(engine)
    ev = evaluate(sc)
    closed = ev.goodput_rps
    # the closed form is not evaluated past its stability (comfortable KV) limit, 0.2 % (vLLM) and 4.8 % above
    top = min(closed * (1.0 + TOLERANCE), 0.999 * ev.stability_limit_rps)
    below = simulate_scenario(sc, rate=closed * (1.0 - TOLERANCE), n_requests=REQUESTS).simulated
    above = simulate_scenario(sc, rate=top, n_requests=REQUESTS).simulated
    assert below is not None
    assert above is not None
    assert below.attainment >= 0.9, (closed, below.attainment)
    assert above.attainment < 0.9, (closed, above.attainment)
