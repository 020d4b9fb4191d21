"""Scenario block ``prfaas:``: a remote Prefill-as-a-Service cluster beside the local PD deployment.

Prompts longer than ``threshold`` tokens (uncached length) are prefilled on ``count`` remote instances of
``gpu`` × ``tp`` and their KV crosses ``link`` (a cross-datacenter link, e.g. ``dci-100g``) to the local decode
pool; the rest are prefilled locally (arXiv 2604.15039 §3.4). ``threshold`` left out: searched (``optimize``
and ``evaluate`` both pick the Eq. 7 balance). ``rtt`` (a time, ``"2ms"``) replaces the link's round trip.

Measured inputs (per GPU and model, replacing pdplan's roofline; every report names which numbers came from
them): ``remote_profile`` / ``local_profile`` are prefill profiles (CSV ``tokens,prefill_s[,kv_bytes]`` or a
bundled name, see :mod:`pdplan.io.profiles`; relative paths resolve against the scenario's folder), and
``decode_tokens_per_s`` is the decode throughput one local decode instance sustains at the TPOT SLO
(``BS_max / T_decode`` of the paper's Eq. 5).
"""

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from pdplan.specs.base import FrozenModel
from pdplan.units import parse_time_s

PosInt = Annotated[int, Field(strict=True, ge=1)]


def _resolve_path(value: object, info: ValidationInfo) -> object:
    """A profile given as a relative path resolves against the scenario's folder; a bare name stays (bundled)."""
    if not isinstance(value, str) or ("/" not in value and not value.endswith(".csv")):
        return value
    path = Path(value)
    base = (info.context or {}).get("base_dir")
    return str(path if path.is_absolute() or base is None else Path(base) / path)


class PrfaasSpec(FrozenModel):
    """The remote prefill cluster, its link, and the routing threshold (fields in the module docstring)."""

    gpu: Annotated[str, Field(min_length=1)]
    tp: PosInt = 8
    count: PosInt = 1
    link: Annotated[str, Field(min_length=1)] = "dci-100g"
    rtt: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None
    threshold: PosInt | None = None
    remote_profile: Annotated[str, Field(min_length=1)] | None = None
    local_profile: Annotated[str, Field(min_length=1)] | None = None
    decode_tokens_per_s: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None

    @field_validator("rtt", mode="before")
    @classmethod
    def _parse_rtt(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("expected a time such as '1ms', got a boolean")
        return parse_time_s(value) if isinstance(value, str) else value

    @field_validator("remote_profile", "local_profile", mode="before")
    @classmethod
    def _paths(cls, value: object, info: ValidationInfo) -> Any:
        return _resolve_path(value, info)

    @property
    def gpus(self) -> int:
        """GPUs of the remote cluster: ``tp·count``."""
        return self.tp * self.count
