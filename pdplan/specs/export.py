"""Specs for ``pdplan export``: the part of an ``optimize --format json`` document an export reads, and the
export data files (``pdplan/data/export/*.yaml``: images, versions, ports, engine behaviour, accepted flags).

The plan models ignore keys they do not use (an export reads a report, which carries much more) but check every
key they do use: a plan must name its mode, its roles' GPU / TP / count, and for disaggregated plans the KV
transfer granularity it was priced with. The data models forbid unknown keys, like every other pdplan data file.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.types import Routing

Granularity = Literal["request", "layer", "chunk"]
Vendor = Literal["nvidia", "amd"]


class _Lenient(BaseModel):
    """A view of a report object: unknown keys are ignored, the keys read are validated."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class PlanRole(_Lenient):
    """One role of a plan (``prefill``, ``decode`` or ``colocated``): GPU type, parallelism, instance count."""

    gpu: str = Field(min_length=1)
    tp: int = Field(ge=1)
    pp: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    count: int = Field(ge=1)
    expert_gather: bool = False
    """ZeRO-Prefill's expert-weight all-gather (said only where chosen)."""

    @property
    def gpus_per_instance(self) -> int:
        """GPUs one instance occupies (docs/architecture.md §4: tp × dp × pp)."""
        return self.tp * self.dp * self.pp


class PricedRole(_Lenient):
    """``priced.roles.<role>``: one role's settings as priced (pdplan/search/priced.py)."""

    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    kv_capacity_tokens: int | None = Field(default=None, ge=0)
    moe_kernel: Literal["fused", "deepgemm_wideep", "cutlass"] | None = None
    two_batch_overlap: bool = False
    redundant_experts: int = Field(default=0, ge=0)
    expert_gather: bool = False


class Priced(_Lenient):
    """A plan's ``priced`` object: the engine, routing and per-role settings it was priced with."""

    engine: str | None = None
    engine_version: str | None = None
    routing: dict[str, Routing] = Field(default_factory=dict)
    transfer_backend: str | None = None
    """The KV data plane backend the transfer was priced with (``nixl-ucx``, ``mooncake-te``; pdplan/data/
    kv_backends.yaml); None: priced on the link alone, or not recorded."""
    roles: dict[str, PricedRole] = Field(default_factory=dict)


class Prfaas(_Lenient):
    """A PrfaaS plan's ``prfaas`` record (docs/json_keys.md): the remote prefill cluster and the prompt length above
    which a request is prefilled there (arXiv 2604.15039's length-threshold routing)."""

    threshold_tokens: float = Field(gt=0, allow_inf_nan=False)
    remote: PlanRole
    link: str | None = None


class PlanTier(_Lenient):
    """One lower tier of a plan's cache (``cache.tier_sizes``): the storage entry and its size as priced (bytes: per
    node for host DRAM and local SSD, the whole pool for a remote pool)."""

    storage: str = Field(min_length=1)
    capacity_bytes: float = Field(ge=0, allow_inf_nan=False)


class PlanCache(_Lenient):
    """A plan's ``cache`` setting (docs/json_keys.md): prefix caching on or off, the routing it was priced with
    (``affinity``: a prefix's requests stay on the instance that holds it), and the tiers below HBM."""

    prefix_caching: bool
    routing: Literal["affinity", "load-balance"]
    tier_sizes: list[PlanTier] = Field(default_factory=list)


class ExportPlan(_Lenient):
    """One ranked plan of ``optimize --format json`` (docs/architecture.md §4 ``plans`` keys)."""

    mode: Literal["disaggregated", "colocated"]
    label: str
    prefill: PlanRole | None = None
    decode: PlanRole | None = None
    colocated: PlanRole | None = None
    granularity: Granularity | None = None
    scheduler: Literal["chunked", "prefill-first"] | None = None
    routing: Routing | None = None
    max_num_seqs: int | None = Field(default=None, ge=1)
    num_gpus: int = Field(ge=1)
    goodput_rps: float = Field(ge=0)
    ttft_p90_s: float | None = None
    tpot_p90_s: float | None = None
    prfaas: Prfaas | None = None
    """The remote prefill cluster of a Prefill-as-a-Service plan: its role is ``remote-prefill``."""
    priced: Priced | None = None
    """What the plan was priced with (``optimize --format json`` since issue #25); None in older documents."""
    cache: dict[str, Any] | None = None
    """The plan's cache setting and report (only PPD's ``turn_placement`` is read: the export's header note)."""
    kv_block_tokens: int | None = Field(default=None, ge=1)
    """The KV block size a ``search.kv_block_tokens`` search chose (docs/kv_data_plane.md §6); None: not searched."""

    @model_validator(mode="after")
    def _roles(self) -> "ExportPlan":
        if self.prfaas is not None and self.mode != "disaggregated":
            raise ValueError("a Prefill-as-a-Service plan (prfaas) must be disaggregated")
        if self.mode == "disaggregated" and (self.prefill is None or self.decode is None):
            raise ValueError("a disaggregated plan needs 'prefill' and 'decode' objects")
        if self.mode == "disaggregated" and self.granularity is None:
            raise ValueError("a disaggregated plan needs 'granularity' (request|layer|chunk)")
        if self.mode == "colocated" and self.colocated is None:
            raise ValueError("a colocated plan needs a 'colocated' object")
        return self

    def priced_role(self, name: str) -> PricedRole | None:
        """The priced settings of role ``name`` (None where the document does not record them)."""
        return None if self.priced is None else self.priced.roles.get(name)

    def roles(self) -> list[tuple[str, PlanRole]]:
        """(role name, role) in launch order: prefill then decode, or the one colocated pool; a PrfaaS plan's remote
        prefill cluster last, as ``remote-prefill``."""
        if self.mode == "colocated":
            assert self.colocated is not None
            return [("colocated", self.colocated)]
        assert self.prefill is not None
        assert self.decode is not None
        remote = [] if self.prfaas is None else [("remote-prefill", self.prfaas.remote)]
        return [("prefill", self.prefill), ("decode", self.decode), *remote]


class EngineDefaults(_Lenient):
    """``assumptions.engine_defaults``: the engine settings the plan was priced with."""

    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)


class PlanAssumptions(_Lenient):
    engine_defaults: EngineDefaults = EngineDefaults()
    engine: dict[str, object] | None = None
    """The engine profile the plan was priced with: ``{name, version, source, engine}`` (``optimize --format json``)."""


class PlanDocument(_Lenient):
    """The top level of ``optimize --format json``: the ranked plans and the inputs they were computed for."""

    plans: list[dict[str, object]] = Field(min_length=1)
    inputs: dict[str, object] = Field(default_factory=dict)
    assumptions: PlanAssumptions = PlanAssumptions()
    engine: dict[str, object] | str | None = None

    def _engine_field(self, *keys: str) -> str | None:
        """The first string under ``keys`` of the engine record: top level, ``inputs.engine`` or
        ``assumptions.engine`` (where ``optimize --format json`` writes it); a bare string is the engine's name."""
        for value in (self.engine, self.inputs.get("engine"), self.assumptions.engine):
            if isinstance(value, str) and "name" in keys:
                return value
            if isinstance(value, dict):
                for key in keys:
                    found = value.get(key)
                    if isinstance(found, str):
                        return found
        return None

    @property
    def engine_name(self) -> str | None:
        """The serving engine the plan was priced for (the profile's ``engine``, else its ``name``; docs/architecture.md
        §4), or None when the document predates it."""
        return self._engine_field("engine", "name")

    @property
    def engine_version(self) -> str | None:
        """The version of the engine profile the plan was priced with (``0.12.0``), or None when not recorded."""
        return self._engine_field("version")

    @property
    def model_name(self) -> str | None:
        """``inputs.model``: an object with ``name`` (current reports) or a bare name (older ones)."""
        model = self.inputs.get("model")
        if isinstance(model, dict):
            name = model.get("name")
            return name if isinstance(name, str) else None
        return model if isinstance(model, str) else None

    def input_str(self, key: str) -> str | None:
        value = self.inputs.get(key)
        return value if isinstance(value, str) else None


# ---- data files ---------------------------------------------------------------------------------------------


class DynamoData(FrozenModel):
    release: str
    api_version: str
    kind: str
    images: dict[Literal["vllm", "sglang", "trtllm"], str]
    working_dirs: dict[Literal["vllm", "sglang", "trtllm"], str]
    hf_token_secret: str
    frontend_http_port: int = Field(ge=1, le=65535)
    sglang_bootstrap_port: int = Field(ge=1, le=65535)
    shared_memory_size: str = Field(pattern=r"^[0-9]+(\.[0-9]+)?([KMGTPE]i)?$")
    """``sharedMemory.size`` of every worker service: the tmpfs at ``/dev/shm`` (a Kubernetes quantity, ``80Gi``)."""
    vllm_kv_transfer_config: dict[str, str]
    """The ``--kv-transfer-config`` Dynamo's vLLM workers of a disaggregated graph take (both roles)."""
    kv_events_config: dict[Literal["vllm", "sglang"], dict[str, str | bool]]
    """The ``--kv-events-config`` a worker needs to publish its KV events to the KV router (``sources.kv_router``)."""
    vendors: list[Vendor]
    sources: dict[str, str]


class EngineData(FrozenModel):
    version: str
    kv_transfer_granularity: Granularity
    colocated_port: int = Field(ge=1, le=65535)
    prefill_port: int = Field(ge=1, le=65535)
    decode_port: int = Field(ge=1, le=65535)
    vendors_colocated: list[Vendor]
    vendors_disaggregated: list[Vendor]
    sources: dict[str, str]
    kv_connector: str | None = None
    kv_load_failure_policy: str | None = None
    kv_offload_connector: str | None = None
    """vLLM's CPU offloading connector, in a MultiConnector with the transfer connector (``sources.kv_offload``)."""
    transfer_backend: str | None = None
    transfer_backends: dict[str, str] = Field(default_factory=dict)
    """A priced KV backend (pdplan/data/kv_backends.yaml name) → what this engine is told to run it with: vLLM's
    ``kv_connector``, SGLang's ``--disaggregation-transfer-backend`` (``sources.transfer_backends``)."""
    proxy_port: int | None = Field(default=None, ge=1, le=65535)
    router_port: int | None = Field(default=None, ge=1, le=65535)
    remote_proxy_port: int | None = Field(default=None, ge=1, le=65535)
    remote_router_port: int | None = Field(default=None, ge=1, le=65535)
    """A PrfaaS plan's second front (over the remote prefill cluster): vLLM's toy proxy, SGLang's router."""
    nixl_side_channel_port: int | None = Field(default=None, ge=1, le=65535)
    bootstrap_port: int | None = Field(default=None, ge=1, le=65535)
    data_parallel_rpc_port: int | None = Field(default=None, ge=1, le=65535)
    """vLLM's data-parallel RPC port, on an instance's first node, for ranks on several nodes
    (``sources.multinode_dp``)."""
    dist_init_port: int | None = Field(default=None, ge=1, le=65535)
    """SGLang's ``--dist-init-addr`` port, on an instance's first node, for an instance on several nodes
    (``sources.multinode``)."""


class RouterData(FrozenModel):
    """One target's request router (``routers`` in targets.yaml): the priced routing policies it runs (``runs``:
    policy → the value of ``flag``), the value written for one it lacks (``nearest``, with a warning), and its other
    choices (``other``, not priced)."""

    name: str
    flag: str | None
    runs: dict[Routing, str]
    nearest: dict[Routing, str] = Field(default_factory=dict)
    other: list[str] = Field(default_factory=list)
    sources: dict[str, str]


class ExportTargets(FrozenModel):
    """``pdplan/data/export/targets.yaml``."""

    schema_version: Literal[1] = 1
    dynamo: DynamoData
    engines: dict[Literal["vllm", "sglang"], EngineData]
    routers: dict[Literal["vllm", "sglang", "dynamo"], RouterData]


class NodeLabel(FrozenModel):
    key: str
    value: str
    source: str
    nvml_name: str | None = None
    """The NVML device name (``nvidia-smi -L``) that NVIDIA GPU Feature Discovery derives an
    ``nvidia.com/gpu.product`` value from (spaces → '-'; ``node_labels.yaml`` header); None for a label given by
    hand (``--node-label``)."""


class NodeLabels(FrozenModel):
    """``pdplan/data/export/node_labels.yaml``: the node label that pins a role to a GPU type."""

    schema_version: Literal[1] = 1
    labels: dict[str, NodeLabel]


class ProgramFlags(FrozenModel):
    source: str
    flags: list[str] = Field(min_length=1)
    version: str | None = None
    """The release the flags were read at (``vLLM 0.20.1``): the one the export targets (``targets.yaml``)."""


class EngineFlags(FrozenModel):
    """``pdplan/data/export/engine_flags.yaml``: the flags each launched program accepts, with the source."""

    schema_version: Literal[1] = 1
    programs: dict[str, ProgramFlags]
