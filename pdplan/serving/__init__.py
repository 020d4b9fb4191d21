"""Serving models: compose a deployment from the perf, transfer and queueing models.

Library entry points (the CLI is a thin view over these)::

    from pdplan.serving import evaluate, load_scenario
    ev = evaluate(load_scenario("examples/default.yaml"), rate=8.0)
    ev.goodput_rps, ev.operating_point.ttft_s.p90

A scenario is resolved once (:func:`resolve`: catalogue look-ups, workload bins); any :class:`Deployment` is then
bound to it and priced by :func:`build` — ``evaluate`` and the optimiser's exact re-evaluation share that path. The
names below are the serving layer's public API: :mod:`pdplan.search` imports nothing else from it.
See :mod:`pdplan.serving.disaggregated` (xPyD), :mod:`pdplan.serving.colocated` (baseline),
:mod:`pdplan.serving.goodput` (max rate at the SLO), :mod:`pdplan.serving.limits` (stability limits).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pdplan.io.scenario import load_scenario
from pdplan.serving.cells import decode_cells
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.deployment import Deployment, Role, scenario_with
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.evaluate import build, build_model, evaluate, operating_point
from pdplan.serving.goodput import REL_TOL as GOODPUT_REL_TOL
from pdplan.serving.goodput import Goodput, ServingModel, find_goodput
from pdplan.serving.resolve import ResolvedScenario, bind, precision_of, resolve
from pdplan.serving.checks.physics import PhysicsInvariantError, check_operating_point
from pdplan.serving.limits import DECODE_U_MAX, PREFILL_RHO_MAX, Binding, Limit, decode_binding
from pdplan.serving.results import ClosedLoop, Evaluation, OperatingPoint
from pdplan.serving.roles import DecodePerf, PrefillPerf, RoleHardware, decode_perf, instance_budget, prefill_perf
from pdplan.serving.snapshot import Latency, LatencySummary, Snapshot
from pdplan.specs.scenario import Scenario


def default_scenario_path() -> Path:
    """The bundled default scenario (package data, identical to ``examples/default.yaml``)."""
    return Path(str(resources.files("pdplan") / "data" / "default_scenario.yaml"))


__all__ = [
    "DECODE_U_MAX",
    "GOODPUT_REL_TOL",
    "PREFILL_RHO_MAX",
    "Binding",
    "ClosedLoop",
    "ColocatedModel",
    "DecodePerf",
    "Deployment",
    "DisaggregatedModel",
    "Evaluation",
    "Goodput",
    "Latency",
    "LatencySummary",
    "Limit",
    "OperatingPoint",
    "PhysicsInvariantError",
    "PrefillPerf",
    "ResolvedScenario",
    "Role",
    "RoleHardware",
    "Scenario",
    "ServingModel",
    "Snapshot",
    "bind",
    "build",
    "build_model",
    "check_operating_point",
    "decode_binding",
    "decode_cells",
    "decode_perf",
    "default_scenario_path",
    "evaluate",
    "find_goodput",
    "instance_budget",
    "load_scenario",
    "operating_point",
    "precision_of",
    "prefill_perf",
    "resolve",
    "scenario_with",
]
