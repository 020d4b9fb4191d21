"""The colocated serving model's numbers handed to the benchmark closed loop
(:mod:`pdplan.benchmark.colocated_loop`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pdplan.benchmark.colocated_loop import LoopInputs, benchmark_counts, benchmark_loop
from pdplan.benchmark.records import BenchmarkLoop
from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.queueing.decode import windowed_mean_context
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.request_overhead import request_delay_s
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import decode_step_fn, prefill_split_s
from pdplan.specs.engine import EngineProfile


def loop_inputs(model: ColocatedModel) -> LoopInputs:
    """Mean lengths, step prices, limits and engine terms of one colocated instance (its share of the clients is
    C/z per instance, as the closed form splits load evenly)."""
    res = model.res
    hw = res.hardware.colocated
    isl, osl = res.lengths.mean_input(), res.lengths.mean_output()
    attention_s = float(model.cells.prob @ model.attention_cell_s)
    prompt_s = model.prefill_s_per_token * isl + attention_s
    engine = hw.engine
    mixed = model.scheduler == "chunked" and (engine is None or engine.scheduling.mixed_batches)
    spread = engine is not None and engine.scheduling.steady_arrivals == "spread"
    eager_s = eager_step_s(hw)
    budget = res.chunk_tokens if model.scheduler == "chunked" else max(round(isl), 1)
    grid = sorted_unique(np.geomspace(1.0, max(float(budget), isl, 2.0) + res.max_num_seqs, 64))
    gemm, _ = prefill_split_s(hw, grid)
    batches = decode_batch_grid(res.max_num_seqs)
    kappa = windowed_mean_context(isl, osl, model.decode.window_tokens)  # isl + osl/2 without a window
    ratio = engine.scheduling.kv_reserve_ratio if engine is not None else None  # SGLang's ratio admission
    return LoopInputs(
        step=model.decode.line_fit,  # the one-line fit, not a concave law's line (decode_lines)
        prompt_s=prompt_s,
        input_tokens=isl,
        output_tokens=osl,
        budget_tokens=budget,
        seats=res.max_num_seqs,
        kv_tokens=model.decode.kv_capacity_tokens,
        mixed=mixed,
        request_delay_s=request_delay_s(hw, isl),
        overlap_steps=engine.scheduling.overlap_extra_steps if engine is not None else 0.0,
        spread=spread,
        state_tokens_per_seq=model.decode.state_tokens_per_seq,
        window_tokens=model.decode.window_tokens,
        startup_cohorts=_startup_cohorts(engine),
        gemm_tokens=grid,
        gemm_s=np.maximum(gemm - gemm[0], 0.0),
        attention_s=attention_s,
        eager_step_s=eager_s,
        kv_on_demand=engine is not None and engine.scheduling.kv_admission != "reserve",
        kv_reserve_ratio=ratio.ratio if ratio is not None else 0.0,
        kv_reserve_clip_tokens=float(ratio.clip_tokens) if ratio is not None else 0.0,
        decode_batches=batches,
        # decode_step_fn prices an instance's batch; with attention DP a rank's b sequences ride in a step of D·b
        decode_step_s=decode_step_fn(hw, batches * hw.dp, batches * hw.dp * kappa),
        merge_arrivals=spread and eager_s > 0.0,  # benchmark_loop._spread_groups: why only eager steps
    )


def decode_batch_grid(max_num_seqs: int) -> np.ndarray:
    """Batch sizes for the loop's τ_d(B): every B up to 64 (where a MoE step bends as its experts saturate), then
    geometric steps to the engine's seats (the step is near-linear there: weights read once, KV per sequence)."""
    top = max(float(max_num_seqs), 2.0)
    return sorted_unique(np.concatenate([np.arange(1.0, min(top, 64.0) + 1.0), np.geomspace(min(top, 64.0), top, 32)]))


def eager_step_s(hw: RoleHardware) -> float:
    """H of one GPU: the profile's eager launch time per MoE layer times the MoE layers of one pipeline stage
    (:mod:`pdplan.benchmark.colocated_loop`, "Eager steps"); 0 without an engine."""
    if hw.engine is None:
        return 0.0
    moe_layers = math.ceil(len(hw.model.moe_layer_indices) / hw.pp)
    return hw.engine.overheads.eager_step_floor_s(moe_layers)


def _startup_cohorts(engine: EngineProfile | None) -> float:
    """The profile's ``startup_cohorts`` (1 without one: the burst cohort alone)."""
    if engine is None or engine.scheduling.startup_cohorts is None:
        return 1.0
    return engine.scheduling.startup_cohorts.value


def benchmark_of(
    model: ColocatedModel, concurrency: int, requests: int | None, warmup: int | None, *, grouped: bool = False
) -> BenchmarkLoop:
    """The benchmark at concurrency C with N measured and W warm-up requests (defaults: the engine's tool's);
    ``grouped`` prices what the deterministic replay of :mod:`pdplan.sim.bench` runs whatever the profile says: the
    phase-locked steady state, and the burst cohort alone as start-up excess (no jitter dissolves the groups)."""
    engine = model.res.hardware.colocated.engine
    tool, n, w = benchmark_counts(engine, concurrency, requests, warmup)
    per_instance = max(1, round(concurrency / model.z))
    inputs = loop_inputs(model)
    if grouped:
        inputs = dataclasses.replace(inputs, spread=False, startup_cohorts=1.0)
    return benchmark_loop(inputs, per_instance, n, w, tool)
