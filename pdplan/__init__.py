"""pdplan: capacity planning for prefill/decode-disaggregated LLM serving.

The library API a notebook user calls; the ``pdplan`` command line is a thin view over it::

    from pdplan import evaluate, load_scenario, optimize

    scenario = load_scenario("examples/default.yaml")
    result = optimize(scenario, budget_gpus=32)
    result.best.label, result.best.goodput_rps_per_gpu, result.baseline_ratio
    ev = evaluate(scenario, rate=10.0)
    ev.goodput_rps, ev.operating_point.ttft_s.p90

Names are imported on first use (PEP 562), so ``import pdplan`` and ``pdplan --version`` stay cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from pdplan.version import VERSION as __version__

_PUBLIC: dict[str, tuple[str, str]] = {
    "load_scenario": ("pdplan.io.scenario", "load_scenario"),
    "open_catalog": ("pdplan.io.catalog", "open_catalog"),
    "validate_files": ("pdplan.io.validation", "validate_files"),
    "evaluate": ("pdplan.evaluation.evaluate", "evaluate"),
    "optimize": ("pdplan.search.optimize", "optimize"),
    "simulate": ("pdplan.sim.compare", "simulate_scenario"),
    "Scenario": ("pdplan.specs.scenario", "Scenario"),
    "Catalog": ("pdplan.io.catalog", "Catalog"),
    "ValidationResult": ("pdplan.io.validation", "ValidationResult"),
    "Evaluation": ("pdplan.evaluation.record", "Evaluation"),
    "OperatingPoint": ("pdplan.serving.operating_point", "OperatingPoint"),
    "ClosedLoop": ("pdplan.benchmark.records", "ClosedLoop"),
    "PlanResult": ("pdplan.search.plans", "PlanResult"),
    "Plan": ("pdplan.search.plans", "Plan"),
    "Comparison": ("pdplan.sim.compare", "Comparison"),
    "PdplanError": ("pdplan.errors", "PdplanError"),
    "SpecError": ("pdplan.errors", "SpecError"),
    "NoFeasiblePlanError": ("pdplan.errors", "NoFeasiblePlanError"),
}

__all__ = [
    "Catalog",
    "ClosedLoop",
    "Comparison",
    "Evaluation",
    "NoFeasiblePlanError",
    "OperatingPoint",
    "PdplanError",
    "Plan",
    "PlanResult",
    "Scenario",
    "SpecError",
    "ValidationResult",
    "__version__",
    "evaluate",
    "load_scenario",
    "open_catalog",
    "optimize",
    "simulate",
    "validate_files",
]

if TYPE_CHECKING:
    from pdplan.benchmark.records import ClosedLoop
    from pdplan.errors import NoFeasiblePlanError, PdplanError, SpecError
    from pdplan.evaluation.evaluate import evaluate
    from pdplan.evaluation.record import Evaluation
    from pdplan.io.catalog import Catalog, open_catalog
    from pdplan.io.scenario import load_scenario
    from pdplan.io.validation import ValidationResult, validate_files
    from pdplan.search.optimize import optimize
    from pdplan.search.plans import Plan, PlanResult
    from pdplan.serving.operating_point import OperatingPoint
    from pdplan.sim.compare import Comparison
    from pdplan.sim.compare import simulate_scenario as simulate
    from pdplan.specs.scenario import Scenario


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'pdplan' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
