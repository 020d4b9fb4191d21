"""A deployment in plain typed values: which instances, how many, joined how — what the serving model is built for.

:class:`Deployment` is the single currency between ``evaluate`` (one deployment, read from a scenario by
:meth:`Deployment.of`) and the optimiser (thousands of candidates, of which the best few are built exactly):
:func:`pdplan.serving.resolve.bind` puts one on a :class:`~pdplan.serving.resolve.ResolvedScenario` without
re-validating a scenario or re-binning its workload, and :func:`pdplan.serving.evaluate.build` prices it.

Fields a deployment leaves ``None`` take the scenario's value or the serving default
(``pdplan/data/serving_defaults.yaml``): ``max_num_seqs``, ``chunk_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdplan.io.scenario import revalidate
from pdplan.specs.scenario import RoleSpec, Scenario
from pdplan.types import Granularity, Mode, Routing, Scheduler


@dataclass(frozen=True, slots=True)
class Role:
    """One pool: GPU type (catalogue name or path), tensor/pipeline parallelism, instance count, and attention
    data parallelism ``dp`` / expert parallelism ``ep`` (GPUs per instance ``tp·dp·pp``)."""

    gpu: str
    tp: int
    pp: int
    count: int
    dp: int = 1
    ep: int = 1
    expert_gather: bool = False
    """ZeRO-Prefill (prefill, ep > 1): expert weights all-gathered instead of the EP all-to-all."""

    @property
    def gpus(self) -> int:
        """GPUs in the pool: ``tp·dp·pp·count``."""
        return self.tp * self.dp * self.pp * self.count

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpu": self.gpu, "tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep}
        out["count"] = self.count
        if self.expert_gather:  # said only where chosen (ZeRO-Prefill)
            out["expert_gather"] = True
        return out

    @classmethod
    def of(cls, spec: RoleSpec) -> Role:
        """The role of a scenario block."""
        return cls(spec.gpu, spec.tp, spec.pp, spec.count, spec.dp, spec.ep, spec.expert_gather)


@dataclass(frozen=True, slots=True)
class Deployment:
    """xPyD (``prefill`` and ``decode`` set, joined by ``link`` with ``granularity`` and ``routing``) or
    colocated (``colocated`` set, batching by ``scheduler`` with prefill chunks of ``chunk_tokens``)."""

    mode: Mode
    prefill: Role | None = None
    decode: Role | None = None
    colocated: Role | None = None
    granularity: Granularity | None = None
    link: str | None = None
    routing: Routing | None = None
    scheduler: Scheduler | None = None
    max_num_seqs: int | None = None
    chunk_tokens: int | None = None
    prefill_max_batch_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.mode == "disaggregated":
            ok = self.prefill is not None and self.decode is not None and self.colocated is None
            ok = ok and self.link is not None and self.granularity is not None and self.routing is not None
        else:
            ok = self.colocated is not None and self.prefill is None and self.decode is None
            ok = ok and self.scheduler is not None
        if not ok:
            raise ValueError(f"inconsistent {self.mode} deployment: {self}")

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        return sum(r.gpus for r in (self.prefill, self.decode, self.colocated) if r is not None)

    @property
    def roles(self) -> tuple[tuple[str, Role], ...]:
        """(role name, role) of each pool present: prefill and decode, or colocated."""
        named = (("prefill", self.prefill), ("decode", self.decode), ("colocated", self.colocated))
        return tuple((name, role) for name, role in named if role is not None)

    @classmethod
    def of(cls, sc: Scenario) -> Deployment:
        """The deployment a scenario describes."""
        if sc.mode == "colocated":
            assert sc.colocated is not None
            return cls(
                "colocated",
                colocated=Role.of(sc.colocated),
                scheduler=sc.colocated.scheduler,
                max_num_seqs=sc.max_num_seqs,
                chunk_tokens=sc.chunk_tokens or sc.colocated.chunk_tokens,
            )
        assert sc.prefill is not None
        assert sc.decode is not None
        return cls(
            "disaggregated",
            prefill=Role.of(sc.prefill),
            decode=Role.of(sc.decode),
            granularity=sc.granularity,
            link=sc.link,
            routing=sc.routing,
            max_num_seqs=sc.max_num_seqs,
            chunk_tokens=sc.chunk_tokens,
            prefill_max_batch_tokens=sc.prefill_max_batch_tokens,
        )


def scenario_with(base: Scenario, d: Deployment) -> Scenario:
    """``base`` with deployment ``d`` written into its blocks and validated again (e.g. to save a plan as a
    scenario file, or to evaluate an optimiser's plan through the scenario path, as a test does)."""
    update: dict[str, Any] = {"mode": d.mode, "max_num_seqs": d.max_num_seqs, "search": None}
    update.update(prefill=None, decode=None, colocated=None)
    if d.colocated is not None:
        update["colocated"] = {**d.colocated.as_dict(), "scheduler": d.scheduler}
    else:
        assert d.prefill is not None
        assert d.decode is not None
        update.update(
            prefill=d.prefill.as_dict(),
            decode=d.decode.as_dict(),
            granularity=d.granularity,
            link=d.link,
            routing=d.routing,
        )
    return revalidate(base, update, source="deployment")
