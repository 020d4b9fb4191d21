"""inference-perf configs (kubernetes-sigs/inference-perf) read as pdplan workloads: shared prefixes, multi-turn chat,
constant or Poisson load stages (docs/reuse_workloads.md §5).

Every field's meaning is read from the tool's source, ``kubernetes-sigs/inference-perf`` at commit ``7de5ef2``
(2026-08-19):

* ``data.type: shared_prefix`` and ``data.shared_prefix`` (``inference_perf/config/datagen/config.py``,
  ``SharedPrefix``): ``num_unique_system_prompts`` G (alias ``num_groups``), ``num_users_per_system_prompt`` U
  (alias ``num_prompts_per_group``), ``system_prompt_len`` S, ``question_len`` Q, ``output_len`` O (each an integer
  or a ``Distribution``; the legacy ``question_distribution`` / ``output_distribution`` replace an integer Q / O),
  ``enable_multi_turn_chat``, ``seed``. A distribution (``inference_perf/config/common.py``) has ``type``
  (``normal`` by default; ``fixed``, ``uniform``, ``lognormal``, ``skew_normal``, ``poisson``), ``min``, ``max``,
  ``mean``, ``std_dev`` or ``variance``; omitted values take the schema defaults
  (``pdplan/data/workload_formats.yaml``).
* The generator (``inference_perf/datagen/synthetic/shared_prefix_datagen.py``): one S per group, one (Q, O) per
  prompt, G·U prompts; request i sends prompt ``i mod G·U`` (``load_lazy_data``), so each prompt comes back every
  G·U requests. With multi-turn chat each prompt is a user session whose context starts as the group's system prompt
  (``LocalUserSession(context=shared_prefix_text)``); round r sends ``context + " " + prompt`` and the answer is
  appended to the context (``inference_perf/apis/user_session.py``, ``UserSessionCompletionAPIData``,
  ``update_context``). The prompt itself already holds the system prompt, so turn 1 is S + (S + Q) tokens and every
  turn adds S + Q new tokens and O output tokens; the same Q and O come back every round of a user.
* Samples (``inference_perf/utils/numeric/distribution/utils.py``, ``sample_from_distribution``) are clipped to
  [min, max] and rounded; ``fixed`` is ``int(mean)``; ``uniform`` draws ``uniform(min, max + 1)``; ``lognormal`` is
  moment-matched to mean and std_dev.
* ``load`` (``inference_perf/config/loadgen/config.py``): ``type`` ``constant`` or ``poisson`` with ``stages`` of
  ``rate`` (requests/s) × ``duration`` (s). Both are Poisson streams (``inference_perf/loadgen/load_timer.py``):
  ``constant`` sends ``int(rate·duration)`` requests with exponential gaps normalised to the stage's duration (a
  Poisson process given its count), ``poisson`` a Poisson count each second spread the same way.

**How pdplan maps it.** Arrivals are ``poisson``. The planning rate is the **highest stage rate**: a plan must hold
at the benchmark's hardest stage; all stage rates and durations are kept (:class:`InferencePerfWorkload`).
Without multi-turn chat the workload is a ``shared_prefix`` block: G prefixes of law S, uniform popularity (every
group has U prompts, sent in turn), questions Q, outputs O, and ``questions_per_prefix`` U where the stages send more
requests R than the list's G·U prompts (each is then resent every G·U requests; the prefix cache prices the steady
state); where R ≤ G·U no prompt is sent twice and every question is new. With multi-turn chat it is a
``sessions`` block: G·U sessions share G system prompts of S tokens; new tokens per turn S + Q; outputs O; the turns
per session follow from the requests R the stages send (``int(rate·duration)`` each; their mean for ``poisson``):
R mod G·U users get ⌈R/G·U⌉ turns, the others ⌊R/G·U⌋; the think time is the start-to-start spacing G·U/λ of a user's
rounds at the planning rate λ (it includes the previous turn's own serving time). What pdplan cannot follow is said
in the workload's ``description``: clipped samples become truncated laws, and pdplan draws each turn's lengths
afresh where inference-perf repeats a user's Q and O.

Keys outside the workload (``api``, ``server``, ``tokenizer``, ``metrics``, ``report``, ``storage``,
``circuit_breakers``, and the load's worker settings) are accepted and not read; any other key, an unsupported
data type, load type or distribution is a one-line :class:`~pdplan.errors.SpecError` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.files import read_yaml_mapping
from pdplan.io.workload_formats import workload_format_defaults
from pdplan.specs.base import first_error_line
from pdplan.specs.length_laws import FixedDist, LognormalDist, NormalDist, ParametricDist, UniformDist
from pdplan.specs.token_pmf import length_pmf, sum_of_parts
from pdplan.specs.workload import WorkloadSpec

SOURCE = "kubernetes-sigs/inference-perf 7de5ef2"
TOP_KEYS = ("api", "data", "load", "metrics", "report", "storage", "server", "tokenizer", "circuit_breakers")
"""The tool's top-level config keys (``inference_perf/config/config.py``, ``Config``)."""
DATA_KEYS = ("type", "shared_prefix", "corpus_file_path")
SHARED_PREFIX_KEYS = {
    "num_unique_system_prompts": "groups",
    "num_groups": "groups",
    "num_users_per_system_prompt": "users",
    "num_prompts_per_group": "users",
    "system_prompt_len": "system",
    "question_len": "question",
    "output_len": "output",
    "question_distribution": "question_legacy",
    "output_distribution": "output_legacy",
    "enable_multi_turn_chat": "multi_turn",
    "seed": "seed",
}
LOAD_KEYS = (
    "type",
    "stages",
    "interval",
    "num_workers",
    "worker_max_concurrency",
    "worker_max_tcp_connections",
    "circuit_breakers",
    "request_timeout",
    "lora_traffic_split",
    "base_seed",
)
DISTRIBUTION_KEYS = ("type", "min", "max", "mean", "std_dev", "variance", "skew", "total_count")


@dataclass(frozen=True)
class InferencePerfWorkload:
    """An inference-perf config as pdplan reads it: the workload, the load stages and the rate pdplan plans at."""

    workload: WorkloadSpec
    stage_rates_per_s: tuple[float, ...]
    stage_durations_s: tuple[float, ...]
    planning_rate_per_s: float
    requests: int
    notes: tuple[str, ...]


def load_inference_perf(path: str | Path) -> InferencePerfWorkload:
    """Read an inference-perf config YAML (module docstring)."""
    path = Path(path)
    return inference_perf_workload(read_yaml_mapping(path), source=str(path), name=path.stem)


def is_inference_perf_config(data: dict[str, Any]) -> bool:
    """A mapping with inference-perf's ``data`` or ``load`` key and no key of pdplan's own workload schema."""
    return bool({"data", "load"} & set(data)) and not set(data) & set(WorkloadSpec.model_fields)


def inference_perf_workload(data: dict[str, Any], *, source: str, name: str) -> InferencePerfWorkload:
    """Map a parsed config (module docstring); errors name ``source`` and the key."""
    _known(data, TOP_KEYS, "", source)
    stages = _stages(data.get("load") or {}, source)
    gen = _data_block(data.get("data"), source)
    rate = max(r for r, _ in stages)
    requests, load_note = _requests(data.get("load") or {}, stages)
    notes = [load_note, f"planning rate: the highest stage rate, {rate:g} requests/s"]
    block = _sessions(gen, requests, rate, notes, source) if gen["multi_turn"] else _shared_prefix(gen, requests, notes)
    spec_data = {
        "name": name,
        "description": "; ".join(n for n in notes if n),
        "source": f"inference-perf config {source} ({SOURCE})",
        "arrival": "poisson",
        **block,
    }
    try:
        spec = WorkloadSpec.model_validate(spec_data)
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(f"cannot be mapped: {message}", source=source, field=field) from None
    return InferencePerfWorkload(
        workload=spec,
        stage_rates_per_s=tuple(r for r, _ in stages),
        stage_durations_s=tuple(d for _, d in stages),
        planning_rate_per_s=rate,
        requests=requests,
        notes=tuple(n for n in notes if n),
    )


def _known(block: dict[str, Any], allowed: tuple[str, ...] | dict[str, str], where: str, source: str) -> None:
    for key in block:
        if key not in allowed:
            raise SpecError(
                f"unknown or unsupported key; pdplan reads: {', '.join(allowed)}", source=source, field=where + str(key)
            )


def _stages(load: Any, source: str) -> list[tuple[float, float]]:
    if not isinstance(load, dict):
        raise SpecError("expected a mapping", source=source, field="load")
    _known(load, LOAD_KEYS, "load.", source)
    kind = load.get("type", "constant")
    if kind not in ("constant", "poisson"):
        raise SpecError(
            f"load type {kind!r} is not supported; pdplan reads constant and poisson stages",
            source=source,
            field="load.type",
        )
    stages = load.get("stages") or []
    if not isinstance(stages, list) or not stages:
        raise SpecError(
            "no load stages; pdplan needs at least one {rate, duration}", source=source, field="load.stages"
        )
    out = []
    for i, stage in enumerate(stages):
        where = f"load.stages.{i}"
        if not isinstance(stage, dict):
            raise SpecError("expected a mapping {rate, duration}", source=source, field=where)
        extra = [k for k, v in stage.items() if k not in ("rate", "duration") and v is not None]
        if extra:
            raise SpecError(
                "only rate and duration apply to constant/poisson stages", source=source, field=f"{where}.{extra[0]}"
            )
        values: list[float] = []
        for key in ("rate", "duration"):
            value = stage.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise SpecError(f"{value!r} must be a number > 0", source=source, field=f"{where}.{key}")
            values.append(float(value))
        out.append((values[0], values[1]))
    return out


def _requests(load: dict[str, Any], stages: list[tuple[float, float]]) -> tuple[int, str]:
    """Requests the stages send: ``int(rate·duration)`` per constant stage, the mean ``rate·duration`` for poisson."""
    if load.get("type", "constant") == "poisson":
        return max(1, round(sum(r * d for r, d in stages))), "arrivals: poisson stages (a Poisson count each second)"
    total = sum(int(r * d) for r, d in stages)
    return max(1, total), "arrivals: constant stages send int(rate x duration) requests with exponential gaps"


def _data_block(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with type: shared_prefix", source=source, field="data")
    _known(data, DATA_KEYS, "data.", source)
    if data.get("type") != "shared_prefix":
        raise SpecError(
            f"data type {data.get('type')!r} is not supported; pdplan reads shared_prefix",
            source=source,
            field="data.type",
        )
    block = data.get("shared_prefix") or {}
    if not isinstance(block, dict):
        raise SpecError("expected a mapping", source=source, field="data.shared_prefix")
    _known(block, SHARED_PREFIX_KEYS, "data.shared_prefix.", source)
    defaults = workload_format_defaults()["inference_perf"]["shared_prefix"]
    given: dict[str, Any] = {}
    for key, value in block.items():
        role = SHARED_PREFIX_KEYS[key]
        if role in given:
            raise SpecError("given twice (a name and its alias)", source=source, field=f"data.shared_prefix.{key}")
        given[role] = (key, value)
    multi_key, multi_turn = given.get("multi_turn", ("enable_multi_turn_chat", False))
    if not isinstance(multi_turn, bool):
        raise SpecError(f"{multi_turn!r} must be true or false", source=source, field=f"data.shared_prefix.{multi_key}")
    gen: dict[str, Any] = {"multi_turn": multi_turn}
    for role, default_key in (("groups", "num_unique_system_prompts"), ("users", "num_users_per_system_prompt")):
        key, value = given.get(role, (default_key, defaults[default_key]))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{value!r} must be an integer >= 1", source=source, field=f"data.shared_prefix.{key}")
        gen[role] = value
    for role, default_key in (("system", "system_prompt_len"), ("question", "question_len"), ("output", "output_len")):
        key, value = given.get(role, (default_key, defaults[default_key]))
        legacy = given.get(f"{role}_legacy")
        if legacy is not None and isinstance(value, dict):
            raise SpecError(
                "give the distribution once: inline or the legacy *_distribution", source=source, field=legacy[0]
            )
        if legacy is not None:  # the legacy distribution replaces an integer length
            key, value = legacy
        gen[role] = _law(value, f"data.shared_prefix.{key}", source)
    return gen


def _law(value: Any, where: str, source: str) -> ParametricDist:
    """An inference-perf length (integer or distribution) as a pdplan length law."""
    if isinstance(value, bool) or (not isinstance(value, int | dict)):
        raise SpecError(f"{value!r} must be an integer or a distribution", source=source, field=where)
    if isinstance(value, int):
        if value < 1:
            raise SpecError(f"{value} tokens: pdplan's lengths are >= 1", source=source, field=where)
        return FixedDist(dist="fixed", value=value)
    _known(value, DISTRIBUTION_KEYS, where + ".", source)
    d = {**workload_format_defaults()["inference_perf"]["distribution"], **value}
    if value.get("variance") is not None:
        if d["std_dev"] > 0:
            raise SpecError(
                "give std_dev or variance, not both (the std_dev default is 200)", source=source, field=where
            )
        d["std_dev"] = math.sqrt(d["variance"])
    lo, hi, mean, std = int(d["min"]), int(d["max"]), float(d["mean"]), float(d["std_dev"])
    try:
        return _law_of_kind(str(d["type"]), lo, hi, mean, std)
    except (ValueError, ValidationError) as err:
        message = first_error_line(err)[1] if isinstance(err, ValidationError) else str(err)
        raise SpecError(message, source=source, field=where) from None


def _law_of_kind(kind: str, lo: int, hi: int, mean: float, std: float) -> ParametricDist:
    if lo > hi:
        raise ValueError(f"min ({lo}) must be <= max ({hi})")
    if kind == "fixed":
        if int(mean) < 1:
            raise ValueError(f"fixed length int(mean) = {int(mean)}; pdplan's lengths are >= 1")
        return FixedDist(dist="fixed", value=int(mean))
    if lo < 1:
        raise ValueError(f"min ({lo}) below 1 token; pdplan's lengths are >= 1")
    if kind == "uniform" or lo == hi:
        return UniformDist(dist="uniform", min=lo, max=hi)
    if kind == "normal":
        return NormalDist(dist="normal", mean=mean, std=std, min=lo, max=hi)
    if kind == "lognormal":
        if std <= 0:
            return FixedDist(dist="fixed", value=min(max(round(mean), lo), hi))
        sigma = math.sqrt(math.log1p((std / mean) ** 2))
        return LognormalDist(dist="lognormal", mu=math.log(mean) - sigma**2 / 2.0, sigma=sigma, min=lo, max=hi)
    raise ValueError(f"distribution type {kind!r} is not supported; pdplan maps fixed, uniform, normal, lognormal")


def _clip_note(name: str, law: ParametricDist) -> str:
    if isinstance(law, NormalDist | LognormalDist):
        outside = 1.0 - law.mass()
        return (
            f"{name}: inference-perf clips draws to [min, max], pdplan truncates ({outside:.2%} of draws fall outside)"
        )
    return ""


def _shared_prefix(gen: dict[str, Any], requests: int, notes: list[str]) -> dict[str, Any]:
    """The ``shared_prefix`` block (module docstring). The prompts recur only if the stages send more requests R than
    the G·U prompts of the list: then ``questions_per_prefix`` U (the prefix cache prices the steady state, in which a
    resent prompt finds itself cached; the list's first pass, G·U of the R requests, finds only its system prompt);
    else no prompt is sent twice and every question is new to the cache."""
    for role in ("system", "question", "output"):
        notes.append(_clip_note(role, gen[role]))
    block = {
        "num_prefixes": gen["groups"],
        "prefix_tokens": gen["system"].model_dump(),
        "question_tokens": gen["question"].model_dump(),
        "output_tokens": gen["output"].model_dump(),
        "popularity": "uniform",
    }
    prompts = gen["groups"] * gen["users"]
    if requests > prompts:
        block["questions_per_prefix"] = gen["users"]
        notes.append(
            f"prompts resent: the stages send {requests} requests over a list of {prompts} prompts, each resent every "
            f"{prompts} requests; priced in the steady state (the list's first pass, {prompts / requests:.1%} of the "
            "requests, finds only its system prompt)"
        )
    else:
        notes.append(f"no prompt resent: the stages send {requests} requests, at most the list's {prompts} prompts")
    return {"shared_prefix": block}


def _sessions(gen: dict[str, Any], requests: int, rate: float, notes: list[str], source: str) -> dict[str, Any]:
    system = gen["system"]
    if not isinstance(system, FixedDist):
        raise SpecError(
            "a distribution of system_prompt_len is not supported with enable_multi_turn_chat (pdplan's sessions "
            "share fixed-length system prompts)",
            source=source,
            field="data.shared_prefix.system_prompt_len",
        )
    users = gen["groups"] * gen["users"]
    per_user, extra = divmod(requests, users)
    if per_user == 0:
        turns: dict[str, Any] = {"dist": "fixed", "value": 1}
    elif extra == 0:
        turns = {"dist": "fixed", "value": per_user}
    else:
        turns = {"dist": "histogram", "values": [per_user, per_user + 1], "weights": [users - extra, extra]}
    new = sum_of_parts([length_pmf(system), length_pmf(gen["question"])])
    new_law = (
        {"dist": "fixed", "value": int(new.values[0])} if new.values.size == 1 else new.as_histogram().model_dump()
    )
    notes.append(_clip_note("question", gen["question"]))
    notes.append(_clip_note("output", gen["output"]))
    notes.append("each turn re-sends the system prompt with the question (new tokens S + Q per turn)")
    notes.append("inference-perf repeats a user's question and output lengths every round; pdplan draws them per turn")
    notes.append(f"think time: the start-to-start spacing {users} users / {rate:g} requests/s of a user's rounds")
    return {
        "sessions": {
            "turns": turns,
            "new_tokens": new_law,
            "output_tokens": gen["output"].model_dump(),
            "think_time": {"dist": "fixed", "value": users / rate},
            "system_prompt_tokens": system.value,
            "distinct_system_prompts": gen["groups"],
            "rate": {"requests_per_s": rate},
        }
    }
