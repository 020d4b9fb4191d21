"""Arrival processes of a workload (``arrival:``): ``poisson`` (default), ``constant`` spacing, ``gamma`` gaps with a
coefficient of variation ``cv`` (cv = 1 is Poisson), or ``trace`` (a trace's own times); docs/reuse_workloads.md §4.

Each process gives ``ca2``, the squared coefficient of variation c_a² of its inter-arrival times (1, 0, cv², and None
for a trace, whose value is measured from its times), the input of the G/G/1 correction in
:mod:`pdplan.queueing.arrivals`. ``poisson`` and ``trace`` stay the words a workload always accepted, so that code
comparing ``spec.arrival == "trace"`` keeps working; ``constant`` and ``gamma`` are mappings.
"""

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from pdplan.specs.base import FrozenModel


class PoissonArrival(FrozenModel):
    process: Literal["poisson"] = "poisson"

    @property
    def ca2(self) -> float | None:
        return 1.0


class TraceArrival(FrozenModel):
    """The trace's own arrival times; c_a² is measured from them (:func:`pdplan.queueing.arrivals.empirical_ca2`)."""

    process: Literal["trace"] = "trace"

    @property
    def ca2(self) -> float | None:
        return None


class ConstantArrival(FrozenModel):
    """Uniform spacing 1/λ: c_a² = 0."""

    process: Literal["constant"]

    @property
    def ca2(self) -> float | None:
        return 0.0


class GammaArrival(FrozenModel):
    """Gamma inter-arrival times of mean 1/λ and coefficient of variation ``cv``: c_a² = cv² (cv = 1 is Poisson)."""

    process: Literal["gamma"]
    cv: Annotated[float, Field(gt=0.0, allow_inf_nan=False)]

    @property
    def ca2(self) -> float | None:
        return float(self.cv) ** 2


ArrivalProcess = PoissonArrival | TraceArrival | ConstantArrival | GammaArrival
ARRIVAL_FORMS = "poisson, constant, {process: gamma, cv: CV} or trace"


def normalise_arrival(value: Any) -> Any:
    """One form per process: ``poisson`` and ``trace`` stay words (as before), ``constant`` and ``gamma`` become
    mappings; an unknown process, or a parameter a process does not take, is an error naming the forms allowed."""
    if isinstance(value, ConstantArrival | GammaArrival):
        return value
    process = value.get("process") if isinstance(value, dict) else value
    if not isinstance(process, str) or process not in ("poisson", "trace", "constant", "gamma"):
        raise ValueError(f"unknown arrival process {process!r}; allowed: {ARRIVAL_FORMS}")
    if isinstance(value, dict) and process in ("poisson", "trace"):
        extra = sorted(set(value) - {"process"})
        if extra:
            raise ValueError(f"arrival {process} takes no parameters, got {', '.join(extra)}")
        return process
    if isinstance(value, str) and process in ("constant", "gamma"):
        return {"process": process}
    return value


def _arrival_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "named"
    if isinstance(value, dict):
        return str(value.get("process"))
    return getattr(value, "process", None)


ArrivalField = Annotated[
    Annotated[Literal["poisson", "trace"], Tag("named")]
    | Annotated[ConstantArrival, Tag("constant")]
    | Annotated[GammaArrival, Tag("gamma")],
    Discriminator(_arrival_tag),
]
"""``WorkloadSpec.arrival`` after :func:`normalise_arrival`."""


def arrival_process(value: str | ConstantArrival | GammaArrival) -> ArrivalProcess:
    """The arrival field as a process object with its ``ca2``."""
    if value == "poisson":
        return PoissonArrival()
    if value == "trace":
        return TraceArrival()
    assert isinstance(value, ConstantArrival | GammaArrival)
    return value
