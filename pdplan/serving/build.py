"""The serving model of a bound deployment: one model per kind.

* :class:`~pdplan.serving.deployment.Disaggregated` → :class:`~pdplan.serving.disaggregated.DisaggregatedModel`;
* :class:`~pdplan.serving.deployment.Colocated` → :class:`~pdplan.serving.colocated.ColocatedModel`;
* :class:`~pdplan.serving.deployment.Prfaas` → the model of its local xPyD cluster (what the plain rows of a PrfaaS
  report describe); the remote cluster's analysis is :class:`pdplan.serving.prfaas.model.PrfaasModel`.

``evaluate`` and the optimiser's exact re-evaluation share this path: the scenario is resolved once and each
deployment only bound (:func:`pdplan.serving.resolve.bind`).
"""

from __future__ import annotations

from typing import Any

from pdplan.serving.colocated import ColocatedModel, build_colocated
from pdplan.serving.deployment import Deployment
from pdplan.serving.disaggregated import DisaggregatedModel, build_disaggregated
from pdplan.serving.resolve import ColocatedHardware, DisaggregatedHardware, ResolvedScenario, bind

LocalModel = DisaggregatedModel | ColocatedModel
"""A serving model of one cluster."""


def build_model(res: ResolvedScenario[Any]) -> LocalModel:
    """The serving model of the deployment ``res`` is bound to."""
    hw = res.hardware
    if isinstance(hw, ColocatedHardware):
        return build_colocated(res)
    if isinstance(hw, DisaggregatedHardware):
        return build_disaggregated(res)
    raise TypeError(f"no serving model for hardware {type(hw).__name__}")


def build(res: ResolvedScenario[Any], deployment: Deployment) -> LocalModel:
    """The serving model of ``deployment`` on a resolved scenario."""
    return build_model(bind(res, deployment))
