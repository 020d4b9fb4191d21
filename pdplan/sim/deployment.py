"""The simulator's view of a scenario: the SAME deployment the closed form evaluates, per request.

:func:`sim_deployment` turns a prepared serving model (:func:`pdplan.serving.build_model`) and
sampled request lengths into a :mod:`pdplan.sim` deployment, so that ``pdplan simulate`` compares
the queueing approximations and nothing else:

* **Prefill** (disaggregated): per-request service = batch-1 roofline *stage* time at the sampled
  prompt length plus the granularity's prefill extra (:func:`pdplan.serving.roles.prefill_perf`,
  :func:`pdplan.transfer.kv.kv_transfer`), FCFS per instance, the scenario's routing policy. With
  ``prefill_max_batch_tokens`` the pool batches instead (:class:`pdplan.sim.PrefillPool`
  ``batch_time_s``/``max_batch_tokens``), each batch priced by the closed form's own
  :class:`~pdplan.serving.roles.PrefillBatchTime` (roofline, granularity extra once per batch).
  With PP > 1 the pass latency exceeds the stage time; the (batch-1) difference is added after
  prefill (to the KV transfer time, and to TTFT under convention B), as the closed form adds it
  to every request.
* **KV transfer**: the exposed time per request from :func:`pdplan.transfer.kv.kv_transfer` (same
  :func:`~pdplan.serving.disaggregated.transfer_config`). When the closed form models the link
  queue, both ends are FIFO resources: the serving prefill instance's NICs and the chosen decode
  instance's NICs, each held ``latency + bytes/BW_side`` per request (the fan-in service time of
  :func:`pdplan.transfer.fan_in.fan_in_link_queue`, whose closed form queues at the busier side only).
* **Decode**: the linearised step ``t0 + t1·B + t2·K`` the closed form uses (``step="linear"``), or
  the full roofline step (``step="roofline"``, which also tests the linearisation); seats =
  ``max_num_seqs``, KV capacity from memory; the simulator reserves ``l + n`` tokens at admission.
  The decode instance is picked by the scenario's routing policy (random, round-robin in
  prefill-completion order, or least-work = fewest outstanding requests).
* **Colocated**: z instances with random routing (the closed form's even split into z M/G/1
  queues); prefill-first serves the batch-1 roofline prefill latency per prompt; chunked serves
  chunks of ``chunk_tokens − B`` tokens costing ``t_p·c + t_a·(c·before + c²/2)`` — the same
  ``S(l) ≈ a + b·l + c·l²`` fit (t_p = b, t_a = 2c) as :mod:`pdplan.serving.colocated` — on top of
  the decode step.
* **TTFT convention**: A (decode streams token 1: n = output steps, the first emits token 1) or B
  (prefill streams token 1: n = output − 1); colocated: the iteration finishing the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel, transfer_config
from pdplan.serving.roles import RoleHardware, decode_step_fn, prefill_perf
from pdplan.sim import Colocated, DecodePool, Disaggregated, KvTransfer, PrefillPool, Requests
from pdplan.sim.spec import StepTimeFn
from pdplan.transfer.fan_in import side_busy_s
from pdplan.transfer.kv import kv_shape_from_model, kv_transfer
from pdplan.types import Binding, FloatArray
from pdplan.types import Int64Array as IntArray

StepModel = Literal["linear", "roofline"]
STEP_MODELS: tuple[str, ...] = ("linear", "roofline")


@dataclass(frozen=True, slots=True)
class SimSetup:
    """A simulator deployment plus per-request TTFT additions the simulator cannot express."""

    deployment: Disaggregated | Colocated
    requests: Requests
    ttft_extra_s: FloatArray
    t0_s: float


def _step_fn(hw: RoleHardware, linear: StepTimeFn, step: StepModel) -> StepTimeFn:
    if step == "linear":
        return linear

    def roofline(batch: FloatArray, context: FloatArray) -> FloatArray:
        return decode_step_fn(hw, batch, context)

    return roofline


def _check_fits(req: Requests, steps: IntArray, kv_cap: float, label: str) -> None:
    need = req.input_tokens + steps
    if float(need.max()) > kv_cap:
        raise NoFeasiblePlanError(
            f"a sampled request needs {int(need.max())} KV tokens, more than the {label} "
            f"instance's {kv_cap:.0f}; the simulator cannot admit it",
            binding_constraint=Binding.DECODE_KV,
        )


def _disaggregated(model: DisaggregatedModel, req: Requests, step: StepModel) -> SimSetup:
    res = model.res
    assert res.prefill is not None
    assert res.decode is not None
    assert res.link is not None
    sc, routing = res.scenario, res.deployment.routing
    assert routing is not None  # a disaggregated deployment always names its routing
    lens = req.input_tokens.astype(np.float64)
    base = prefill_perf(res.prefill, lens)
    cfg = transfer_config(res)
    kv = kv_shape_from_model(res.model, res.prefill.precision.kv_bytes)
    xfer = kv_transfer(lens, kv, res.link, cfg, prefill_time_s=base.latency_s)
    pipe = base.latency_s - base.service_s  # PP > 1: pass latency beyond the stage time
    busy = pbusy = None
    if model.link_queued:
        nics_p, nics_d = cfg.side_nics
        busy, pbusy = side_busy_s(xfer, res.link, nics_d), side_busy_s(xfer, res.link, nics_p)
    dec = model.decode
    steps = req.output_tokens - (0 if sc.ttft_convention == "A" else 1)
    _check_fits(req, steps, dec.kv_capacity_tokens, "decode")
    dep = Disaggregated(
        prefill=_prefill_pool(model, base.service_s + xfer.prefill_extra_s),
        decode=DecodePool(
            model.y,
            _step_fn(res.decode, dec.step, step),
            max_batch=res.max_num_seqs,
            kv_capacity_tokens=dec.kv_capacity_tokens,
            routing=routing,
        ),
        transfer=KvTransfer(
            time_s=pipe + np.asarray(xfer.exposed_s),
            link_busy_s=busy,
            prefill_link_busy_s=pbusy,
            stream_lead_s=xfer.overlap_s - pipe,
            stream_s=xfer.time_s,
        ),
        convention=sc.ttft_convention,
    )
    extra = pipe if sc.ttft_convention == "B" else np.zeros_like(pipe)
    return SimSetup(dep, req, np.asarray(extra, dtype=np.float64), dec.step.t0_s)


def _prefill_pool(model: DisaggregatedModel, service_s: FloatArray) -> PrefillPool:
    """Batch-1 FCFS pool with per-request ``service_s``, or the batched pool of the scenario."""
    routing = model.res.deployment.routing
    assert routing is not None  # a disaggregated deployment always names its routing
    batched = model.pool.batched
    if batched is None:
        return PrefillPool(model.x, routing, service_s=service_s)
    price = batched.batch_time

    def batch_time_s(tokens: float, sum_sq_tokens: float) -> float:
        return float(price(np.array([tokens]), np.array([sum_sq_tokens]))[0])

    return PrefillPool(model.x, routing, batch_time_s=batch_time_s, max_batch_tokens=int(batched.budget_tokens))


def _colocated(model: ColocatedModel, req: Requests, step: StepModel) -> SimSetup:
    res = model.res
    assert res.colocated is not None
    dec = model.decode
    _check_fits(req, req.output_tokens - 1, dec.kv_capacity_tokens, "colocated")
    t_p, t_a = model.prefill_s_per_token, model.attention_s_per_token2

    def chunk_time(tokens: FloatArray, before: FloatArray) -> FloatArray:
        return np.asarray(t_p * tokens + t_a * (tokens * before + 0.5 * tokens**2), np.float64)

    service = None
    if model.scheduler == "prefill-first":
        service = prefill_perf(res.colocated, req.input_tokens.astype(np.float64)).latency_s
    dep = Colocated(
        instances=model.z,
        step_time_s=_step_fn(res.colocated, dec.step, step),
        scheduler="chunked" if model.scheduler == "chunked" else "prefill-first",
        routing="random",
        max_batch=res.max_num_seqs,
        kv_capacity_tokens=dec.kv_capacity_tokens,
        prefill_service_s=service,
        token_budget=res.chunk_tokens,
        chunk_time_s=chunk_time,
    )
    return SimSetup(dep, req, np.zeros(req.count), dec.step.t0_s)


def sim_deployment(
    model: DisaggregatedModel | ColocatedModel,
    input_tokens: IntArray,
    output_tokens: IntArray,
    step: StepModel = "linear",
) -> SimSetup:
    """The simulator deployment of ``model`` for sampled request lengths (module docstring)."""
    req = Requests.of(input_tokens, np.maximum(output_tokens, 1))
    if isinstance(model, DisaggregatedModel):
        return _disaggregated(model, req, step)
    return _colocated(model, req, step)
