"""Serving models: compose a deployment from the perf, transfer and queueing models.

Library entry points (the CLI is a thin view over these)::

    from pdplan.serving import evaluate, load_scenario
    ev = evaluate(load_scenario("examples/default.yaml"), rate=8.0)
    ev.goodput_rps, ev.operating_point.ttft_s.p90

See :mod:`pdplan.serving.disaggregated` (xPyD), :mod:`pdplan.serving.colocated` (baseline),
:mod:`pdplan.serving.goodput` (max rate at the SLO), :mod:`pdplan.serving.closed_loop`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pdplan.io.scenario import load_scenario
from pdplan.serving.evaluate import build_model, evaluate, operating_point
from pdplan.serving.goodput import Goodput, find_goodput
from pdplan.serving.inputs import ResolvedScenario, resolve
from pdplan.serving.results import ClosedLoop, Evaluation, OperatingPoint
from pdplan.serving.snapshot import LatencySummary, Snapshot
from pdplan.specs.scenario import Scenario


def default_scenario_path() -> Path:
    """The bundled default scenario (package data, identical to ``examples/default.yaml``)."""
    return Path(str(resources.files("pdplan") / "data" / "default_scenario.yaml"))


__all__ = [
    "ClosedLoop",
    "Evaluation",
    "Goodput",
    "LatencySummary",
    "OperatingPoint",
    "ResolvedScenario",
    "Scenario",
    "Snapshot",
    "build_model",
    "default_scenario_path",
    "evaluate",
    "find_goodput",
    "load_scenario",
    "operating_point",
    "resolve",
]
