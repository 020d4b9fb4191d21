"""A MoE routing law (:class:`RoutingLaw`): how a layer's tokens spread over its experts (schema only).

The formulas that use it are in :mod:`pdplan.perf.moe_routing`; the named presets, each with its source, are
``pdplan/data/moe_routing.yaml`` (read by :func:`pdplan.io.perf_data.routing_law`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LawKind = Literal["balanced", "uniform", "power_law", "eplb"]


@dataclass(frozen=True)
class RoutingLaw:
    """A routing law: ``kind`` and, for ``power_law``, its exponent ``alpha`` (> 0, != 1, != 2 handled);
    ``load_scale`` multiplies the tokens the law spreads (AIConfigurator's SGLang EPLB prefill rule evaluates its
    law at 0.8·T: ``pdplan/data/moe_routing.yaml``), 1 for every measured law."""

    kind: LawKind = "uniform"
    alpha: float = 0.0
    load_scale: float = 1.0


UNIFORM = RoutingLaw()
"""The default law: independent uniform expert choices (the maximum-entropy assumption)."""
