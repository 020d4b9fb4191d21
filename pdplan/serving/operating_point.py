"""The serving model at one Poisson rate: latencies, attainment, utilisations and the constraint closest to its
limit (:class:`OperatingPoint`, :func:`operating_point`), what ``evaluate --rate`` and every plan report."""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.serving.limits import DECODE_U_MAX, PREFILL_RHO_MAX
from pdplan.serving.snapshot import LatencySummary, Snapshot
from pdplan.specs.scenario import SloSpec
from pdplan.types import Binding, UtilisationKey, tpot_at, ttft_at


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Latencies, attainment and utilisations at one Poisson rate."""

    rate_rps: float
    ttft_s: LatencySummary
    tpot_s: LatencySummary
    attainment: float
    utilisation: dict[UtilisationKey, float]
    binding_constraint: str


def operating_point(snap: Snapshot, slo: SloSpec) -> OperatingPoint:
    """Summaries at the snapshot's single rate and the constraint closest to its limit."""
    ttft = snap.ttft_summary(slo.percentile)[0]
    tpot = snap.tpot_summary(slo.percentile)[0]
    util = {k: float(v[0]) for k, v in snap.utilisation.items()}
    pressure: dict[str, float] = {
        ttft_at(slo.percentile): ttft.at_percentile / slo.ttft,
        tpot_at(slo.percentile): tpot.at_percentile / slo.tpot,
        Binding.PREFILL_UTILISATION: util["prefill"] / PREFILL_RHO_MAX,
        Binding.DECODE_UTILISATION: util["decode"] / DECODE_U_MAX,
        Binding.DECODE_KV: util["decode_kv"],
    }
    if "link" in util:
        pressure[Binding.LINK] = util["link"] / PREFILL_RHO_MAX
    binding = max(pressure, key=lambda k: pressure[k])
    attainment = float(snap.attainment(slo.ttft, slo.tpot)[0])
    return OperatingPoint(float(snap.rates[0]), ttft, tpot, attainment, util, binding)
