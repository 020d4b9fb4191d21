"""A deployment in plain typed values: one union of three kinds, each with exactly the fields it uses.

* :class:`Disaggregated` — xPyD: a prefill pool and a decode pool joined by a KV link (granularity, routing);
* :class:`Colocated` — z instances each doing prefill and decode, batched by a scheduler;
* :class:`Prfaas` — Prefill-as-a-Service: a local :class:`Disaggregated` cluster plus a remote prefill cluster that
  takes the prompts above a length threshold (the scenario's ``prfaas:`` block).

:data:`Deployment` is the single currency between ``evaluate`` (one deployment, read from a scenario by
:func:`deployment_of`) and the optimiser (thousands of candidates, of which the best few are built exactly):
:func:`pdplan.serving.resolve.bind` puts one on a :class:`~pdplan.serving.resolve.ResolvedScenario` without
re-validating a scenario or re-binning its workload, and :func:`pdplan.serving.build.build_model` prices it.

Engine settings a deployment leaves ``None`` take the scenario's value or the engine profile's default
(``max_num_seqs``, ``chunk_tokens``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pdplan.io.scenario import revalidate
from pdplan.specs.cache import CacheSpec
from pdplan.specs.prfaas import PrfaasSpec
from pdplan.specs.scenario import RoleSpec, Scenario
from pdplan.types import Granularity, Mode, Routing, Scheduler

DeploymentKind = Literal["disaggregated", "colocated", "prfaas"]


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

    def with_count(self, count: int) -> Role:
        """The same instance type, ``count`` instances."""
        return dataclasses.replace(self, count=count)

    @classmethod
    def of(cls, spec: RoleSpec) -> Role:
        """The role of a scenario block."""
        return cls(spec.gpu, spec.tp, spec.pp, spec.count, spec.dp, spec.ep, spec.expert_gather)


@dataclass(frozen=True, slots=True)
class Disaggregated:
    """xPyD: ``prefill`` and ``decode`` pools joined by ``link`` with ``granularity``, requests placed by
    ``routing``; ``prefill_max_batch_tokens`` set: batched prefill (None: one prompt at a time)."""

    prefill: Role
    decode: Role
    link: str
    granularity: Granularity
    routing: Routing
    max_num_seqs: int | None = None
    chunk_tokens: int | None = None
    prefill_max_batch_tokens: int | None = None
    cache: CacheSpec | None = None
    """The prefix cache (where the workload reuses KV): on or off, routing, tiers below HBM; None: the engines'
    default (on, HBM only, affinity routing)."""
    kv_backend: str | None = None
    """The KV transfer backend the optimiser chose (``search.kv_backends``); None: the scenario's ``kv_backend``."""
    kv_block_tokens: int | None = None
    """The KV block size the optimiser chose (``search.kv_block_tokens``); None: the scenario's."""

    kind: ClassVar[DeploymentKind] = "disaggregated"
    mode: ClassVar[Mode] = "disaggregated"

    @property
    def roles(self) -> tuple[tuple[str, Role], ...]:
        """(pool name, role) of each pool."""
        return (("prefill", self.prefill), ("decode", self.decode))

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        return self.prefill.gpus + self.decode.gpus

    def less_one_instance(self) -> Disaggregated:
        """One instance of each pool down (``n+1`` redundancy); the caller checks that each pool has two."""
        return dataclasses.replace(
            self,
            prefill=self.prefill.with_count(self.prefill.count - 1),
            decode=self.decode.with_count(self.decode.count - 1),
        )


@dataclass(frozen=True, slots=True)
class Colocated:
    """z = ``instance.count`` instances each doing prefill and decode, batched by ``scheduler`` (chunked: prompts
    split into chunks of ``chunk_tokens``)."""

    instance: Role
    scheduler: Scheduler
    max_num_seqs: int | None = None
    chunk_tokens: int | None = None
    cache: CacheSpec | None = None
    """The prefix cache, as :attr:`Disaggregated.cache`."""

    kind: ClassVar[DeploymentKind] = "colocated"
    mode: ClassVar[Mode] = "colocated"

    @property
    def roles(self) -> tuple[tuple[str, Role], ...]:
        """(pool name, role) of the one pool."""
        return (("colocated", self.instance),)

    @property
    def num_gpus(self) -> int:
        return self.instance.gpus

    def less_one_instance(self) -> Colocated:
        return dataclasses.replace(self, instance=self.instance.with_count(self.instance.count - 1))


@dataclass(frozen=True, slots=True)
class Prfaas:
    """Prefill-as-a-Service: the ``local`` xPyD cluster, and the ``remote`` prefill cluster (GPU, TP, instances,
    cross-datacenter link, threshold, measured profiles) that prefills prompts above the threshold. ``mode`` is the
    local cluster's ("disaggregated": what every report's ``mode`` says); ``num_gpus`` counts the local GPUs, as the
    scenario's GPU count does (the remote cluster is reported apart)."""

    local: Disaggregated
    remote: PrfaasSpec

    kind: ClassVar[DeploymentKind] = "prfaas"
    mode: ClassVar[Mode] = "disaggregated"

    @property
    def roles(self) -> tuple[tuple[str, Role], ...]:
        return self.local.roles

    @property
    def num_gpus(self) -> int:
        return self.local.num_gpus


Deployment = Disaggregated | Colocated | Prfaas
"""Any deployment kind."""


def local_part(d: Deployment) -> Disaggregated | Colocated:
    """The part of ``d`` that runs on the local cluster's serving model (a PrfaaS deployment's local xPyD)."""
    return d.local if isinstance(d, Prfaas) else d


def deployment_of(sc: Scenario) -> Deployment:
    """The deployment a scenario describes."""
    if sc.mode == "colocated":
        if sc.colocated is None:  # the scenario model guarantees the block of its mode
            raise TypeError(f"colocated scenario {sc.name!r} has no colocated block")
        return Colocated(
            Role.of(sc.colocated),
            sc.colocated.scheduler,
            max_num_seqs=sc.max_num_seqs,
            chunk_tokens=sc.chunk_tokens or sc.colocated.chunk_tokens,
            cache=sc.cache,
        )
    if sc.prefill is None or sc.decode is None:  # the scenario model guarantees the blocks of its mode
        raise TypeError(f"disaggregated scenario {sc.name!r} lacks a prefill or decode block")
    local = Disaggregated(
        Role.of(sc.prefill),
        Role.of(sc.decode),
        sc.link,
        sc.granularity,
        sc.routing,
        max_num_seqs=sc.max_num_seqs,
        chunk_tokens=sc.chunk_tokens,
        prefill_max_batch_tokens=sc.prefill_max_batch_tokens,
        cache=sc.cache,
    )
    return local if sc.prfaas is None else Prfaas(local, sc.prfaas)


def scenario_with(base: Scenario, d: Deployment) -> Scenario:
    """``base`` with deployment ``d`` written into its blocks and validated again (e.g. to save a plan as a
    scenario file, or to evaluate an optimiser's plan through the scenario path, as a test does)."""
    return revalidate(base, _scenario_update(d), source="deployment")


def _scenario_update(d: Deployment) -> dict[str, Any]:
    """The scenario fields that describe ``d``."""
    local = local_part(d)
    update: dict[str, Any] = {"mode": d.mode, "max_num_seqs": local.max_num_seqs, "search": None}
    update.update(prefill=None, decode=None, colocated=None)
    if local.cache is not None:
        update["cache"] = local.cache.model_dump()
    if isinstance(local, Colocated):
        update["colocated"] = {**local.instance.as_dict(), "scheduler": local.scheduler}
        return update
    update.update(
        prefill=local.prefill.as_dict(),
        decode=local.decode.as_dict(),
        granularity=local.granularity,
        link=local.link,
        routing=local.routing,
    )
    return update
