"""Input checks of the simulator: one :class:`~pdplan.errors.SpecError` line per problem."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pdplan.errors import SpecError
from pdplan.sim.spec import (
    COLOCATED_ROUTINGS,
    DECODE_ROUTINGS,
    PREFILL_ROUTINGS,
    SCHEDULERS,
    Colocated,
    Disaggregated,
    Requests,
    check_capacity,
    check_count,
    check_step_fn,
    decode_steps,
    largest_need_tokens,
)


def check_disaggregated(dep: Disaggregated, req: Requests) -> None:
    """Counts ≥ 1, known routing, exactly one prefill-time input, decode fits one request."""
    pre, dec = dep.prefill, dep.decode
    check_count(pre.instances, "prefill.instances")
    check_count(dec.instances, "decode.instances")
    if pre.routing not in PREFILL_ROUTINGS:
        raise SpecError(f"prefill.routing must be one of {', '.join(PREFILL_ROUTINGS)}, got {pre.routing!r}")
    if dec.routing not in DECODE_ROUTINGS:
        raise SpecError(f"decode.routing must be one of {', '.join(DECODE_ROUTINGS)}, got {dec.routing!r}")
    given = [pre.service_s is not None, pre.batch_time_s is not None, pre.start is not None]
    if sum(given) != 1:
        raise SpecError("give exactly one of prefill.service_s, prefill.batch_time_s and prefill.start")
    if pre.routes is not None and pre.start is None:
        raise SpecError("prefill.routes (pinned instances) needs prefill.start (the dispatched pool)")
    if pre.batch_time_s is not None:
        check_count(pre.max_batch_tokens, "prefill.max_batch_tokens")
    steps = decode_steps(req, dep.convention)
    check_capacity(req, steps, dec.max_batch, dec.kv_capacity_tokens, dec.state_tokens_per_seq, dec.window_tokens)
    check_step_fn(dec.step_time_s, dec.max_batch, dec.kv_capacity_tokens, "decode.step_time_s")
    if dec.pd_admission is not None:
        reserved = dec.pd_admission.reserved_tokens  # the final footprint fits (check_capacity): prompt + R binds
        need = largest_need_tokens(req, steps, dec.state_tokens_per_seq, dec.window_tokens, reserved)
        if need > dec.kv_capacity_tokens:
            raise SpecError(
                f"decode.kv_capacity_tokens={dec.kv_capacity_tokens} is smaller than the largest prompt + state + "
                f"reserved decode tokens ({need:.0f}): the decode server could never admit it"
            )


def check_colocated(dep: Colocated, req: Requests) -> None:
    """Counts ≥ 1, known scheduler/routing, the scheduler's prefill input, one request fits."""
    check_count(dep.instances, "instances")
    if dep.scheduler not in SCHEDULERS:
        raise SpecError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {dep.scheduler!r}")
    if dep.routing not in COLOCATED_ROUTINGS:
        raise SpecError(f"routing must be one of {', '.join(COLOCATED_ROUTINGS)}, got {dep.routing!r}")
    steps = decode_steps(req, "B")
    check_capacity(req, steps, dep.max_batch, dep.kv_capacity_tokens, dep.state_tokens_per_seq, dep.window_tokens)
    check_step_fn(dep.step_time_s, dep.max_batch, dep.kv_capacity_tokens, "step_time_s")
    if dep.scheduler == "prefill-first":
        if dep.prefill_service_s is None and dep.start is None:
            raise SpecError("scheduler 'prefill-first' needs prefill_service_s or start")
        if not dep.reserve_kv:
            raise SpecError("reserve_kv=False needs scheduler 'chunked' (chunk_time_s prices a preempted recompute)")
    if dep.ratio_admission is not None and dep.reserve_kv:
        raise SpecError("ratio_admission needs reserve_kv=False (SGLang holds the growing context)")
    if dep.scheduler == "prefill-first":
        return
    check_count(dep.token_budget, "token_budget")
    if dep.token_budget <= dep.max_batch:
        raise SpecError(
            f"token_budget ({dep.token_budget}) must exceed max_batch ({dep.max_batch}), else prefill can starve"
        )
    if dep.chunk_time_s is None:
        raise SpecError("scheduler 'chunked' needs chunk_time_s")
    probe = np.asarray(dep.chunk_time_s(np.array([1.0, 64.0]), np.array([0.0, 512.0]), 0.0), dtype=np.float64)
    if probe.shape != (2,) or not np.all(np.isfinite(probe)) or np.any(probe < 0):
        raise SpecError("chunk_time_s must map arrays [m] to finite non-negative seconds [m]")


def check_routes(routes: ArrayLike | None, n: int, instances: int, name: str) -> list[int] | None:
    """Pinned instances as a list: one integer in [0, instances) per request; None when not given."""
    if routes is None:
        return None
    raw = np.asarray(routes)
    arr = raw.astype(np.int64)
    if raw.shape != (n,) or not np.array_equal(arr, raw) or bool(np.any((arr < 0) | (arr >= instances))):
        raise SpecError(f"{name} must be {n} integers in [0, {instances})")
    out: list[int] = arr.tolist()
    return out
