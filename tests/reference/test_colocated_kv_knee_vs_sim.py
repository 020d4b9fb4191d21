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

SGLang (the simulator runs its ratio admission, decay and retraction, pdplan/sim/ratio_admission.py): on the same
pick its closed-form goodput 9.358 req/s is TTFT-bound 1.5 % below its comfortable KV limit 9.496, and the simulated
goodput 9.505 lies at that limit, so the bracket above cannot fail above it; the KV-bound case is the same pick with
400-token mean outputs and a 1 s TTFT. There the closed form's goodput was its comfortable (P99) KV limit, 5.371
req/s against 5.623 simulated (−4.5 %); with the colocated KV admission queue (issue #23 item 5,
pdplan.queueing.kv_admission.RidingKvAdmission) it runs past that limit to where the admission wait brings the P90
TTFT to 1 s: 5.617 req/s, marked beyond its comfortable KV limit, against 5.599 simulated (+0.3 %, 100,000 requests,
seed 0, a goodput bisection; the stability limit is now the mean KV limit, 5.784). Between 5.37 and 5.8 req/s the
simulated instance retracts nothing and its ratio sits at the floor r = 0.098 at 99.9 % of its iteration
boundaries: the ratio check turns requests away before a decode step runs out of KV, so the floor the closed form
takes holds here.
"""

from __future__ import annotations

import pytest
from support.goodput_bracket import goodput_bracket
from support.opt13b_colocated import opt13b_colocated

from pdplan.evaluation import evaluate
from pdplan.sim.compare import simulate_scenario
from pdplan.types import Binding

REQUESTS = 100_000
TOLERANCE = 0.06


TRTLLM_OVERLAP_MISS = (
    "known miss since 2026-12-07: TensorRT-LLM's overlap step on token 1 (one iteration, in the closed form and the "
    "simulator alike, tests/unit/test_overlap_step.py) makes the goodput TTFT-bound lower: closed form 7.72 req/s "
    "(9.39 before) against about 6.93 simulated (attainment 0.908 / 0.895 at 6.8 / 7.0 req/s, 50,000 requests): "
    "+11 %. The "
    "closed form's P90 TTFT was already below the simulator's at this load before the step (179 against 198 ms at "
    "7.26 req/s, -9.5 %, when TTFT did not bind); the step adds 57 ms at P90 in the closed form and 66 simulated "
    "(236 against 264 ms). Since the drain steps' spread is coupled to the TTFT (pdplan/serving/overlap_ttft.py "
    "drain_step_var_s2, 2026-12-07): closed form 7.42 req/s, +7.1 %"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine", ["vllm", pytest.param("trtllm", marks=pytest.mark.xfail(strict=True, reason=TRTLLM_OVERLAP_MISS))]
)
def test_simulator_goodput_within_six_percent_of_the_closed_form(engine: str) -> None:
    sc = opt13b_colocated(engine)
    ev = evaluate(sc)
    closed = ev.goodput_rps
    # the closed form is not evaluated past its stability limit: vLLM's pinned limit (preemption with recompute,
    # 9.948 req/s against a 9.592 goodput, 2026-12-07); TensorRT-LLM's utilisation limit, 10.6 % above (past its
    # comfortable KV limit, 4.8 % above, it queues for KV admission)
    top = min(closed * (1.0 + TOLERANCE), 0.999 * ev.stability_limit_rps)
    below = simulate_scenario(sc, rate=closed * (1.0 - TOLERANCE), n_requests=REQUESTS).simulated
    above = simulate_scenario(sc, rate=top, n_requests=REQUESTS).simulated
    assert below is not None
    assert above is not None
    assert below.attainment >= 0.9, (closed, below.attainment)
    assert above.attainment < 0.9, (closed, above.attainment)


@pytest.mark.slow
def test_sglang_kv_bound_goodput_within_six_percent_of_the_simulator() -> None:
    """|closed / simulated − 1| ≤ 6 % decided by two runs instead of a goodput bisection
    (tests/support/goodput_bracket.py): at seed 0 the closed form's 5.668 req/s, the simulation's attainment 0.993 at
    5.347 and 0.237 at 5.832 (0.999 × the stability limit, below 5.668 / 0.94)."""
    sc = opt13b_colocated("sglang", output_mean=400, ttft="1s")
    ev = evaluate(sc)
    assert ev.stability_binding is Binding.DECODE_KV  # the mean (fluid) KV limit
    assert ev.beyond_kv_comfort  # past the comfortable one: requests queue for KV admission
    bracket = goodput_bracket(sc, TOLERANCE, REQUESTS)
    assert bracket.holds(), bracket
