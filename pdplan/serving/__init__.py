"""The open-loop serving model: compose a deployment from the perf, transfer and queueing models.

A scenario is resolved once (:func:`resolve`: catalogue look-ups, workload bins); any :data:`Deployment`
(:class:`Disaggregated`, :class:`Colocated` or :class:`Prfaas`) is then bound to it (:func:`bind`) and priced by
:func:`build_model` — ``evaluate`` (:mod:`pdplan.evaluation`) and the optimiser's exact re-evaluation share that
path. One model per kind: :mod:`pdplan.serving.disaggregated` (xPyD), :mod:`pdplan.serving.colocated`,
:mod:`pdplan.serving.prfaas` (remote prefill); then :mod:`pdplan.serving.goodput` (max rate at the SLO),
:mod:`pdplan.serving.limits` (stability limits), :mod:`pdplan.serving.ttft` (TTFT's parts) and
:mod:`pdplan.serving.checks` (physics invariants, report warnings). The names below are the package's face.
"""

from __future__ import annotations

from pdplan.serving.build import LocalModel, build, build_model
from pdplan.serving.cells import decode_cells
from pdplan.serving.checks.physics import PhysicsInvariantError, check_operating_point
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.deployment import Colocated, Deployment, Disaggregated, Prfaas, Role, deployment_of, scenario_with
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.goodput import REL_TOL as GOODPUT_REL_TOL
from pdplan.serving.goodput import Goodput, ServingModel, find_goodput
from pdplan.serving.limits import DECODE_U_MAX, PREFILL_RHO_MAX, Limit, decode_binding
from pdplan.serving.operating_point import OperatingPoint, operating_point
from pdplan.serving.resolve import (
    ColocatedHardware,
    DisaggregatedHardware,
    ResolvedScenario,
    bind,
    precision_of,
    resolve,
)
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.serving.roles import DecodePerf, PrefillPerf, decode_perf, prefill_perf
from pdplan.serving.snapshot import Latency, LatencySummary, Snapshot

__all__ = [
    "DECODE_U_MAX",
    "GOODPUT_REL_TOL",
    "PREFILL_RHO_MAX",
    "Colocated",
    "ColocatedHardware",
    "ColocatedModel",
    "DecodePerf",
    "Deployment",
    "Disaggregated",
    "DisaggregatedHardware",
    "DisaggregatedModel",
    "Goodput",
    "Latency",
    "LatencySummary",
    "Limit",
    "LocalModel",
    "OperatingPoint",
    "PhysicsInvariantError",
    "PrefillPerf",
    "Prfaas",
    "ResolvedScenario",
    "Role",
    "RoleHardware",
    "ServingModel",
    "Snapshot",
    "bind",
    "build",
    "build_model",
    "check_operating_point",
    "decode_binding",
    "decode_cells",
    "decode_perf",
    "deployment_of",
    "find_goodput",
    "instance_budget",
    "operating_point",
    "precision_of",
    "prefill_perf",
    "resolve",
    "scenario_with",
]
