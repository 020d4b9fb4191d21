"""``evaluate``: one deployment at a load — an open loop at a Poisson rate, or a closed loop at a concurrency as
benchmark clients run it — and the :class:`~pdplan.evaluation.record.Evaluation` it returns.

    from pdplan.evaluation import evaluate
    ev = evaluate(load_scenario("examples/default.yaml"), rate=8.0)
    ev.goodput_rps, ev.operating_point.ttft_s.p90
"""

from __future__ import annotations

from pdplan.evaluation.evaluate import evaluate
from pdplan.evaluation.record import Evaluation

__all__ = ["Evaluation", "evaluate"]
