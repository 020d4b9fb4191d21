"""The optimiser behind ``pdplan optimize``: search xPyD deployments and the colocated baseline.

Library entry point::

    from pdplan.search import optimize
    result = optimize(load_scenario("examples/default.yaml"))
    result.best.deployment_label, result.best.goodput_rps_per_gpu
"""

from pdplan.search.plans import Plan, PlanResult, SearchStats

__all__ = ["Plan", "PlanResult", "SearchStats"]
