"""Which line of a concave decode step a serving model prices, and the best of them (issue #23: Mixtral's refusal).

A MoE's decode step is concave in the batch: its expert reads saturate once the batch touches every expert
(Mixtral-8x7B on H100 TP2 at 700 tokens of context: 7.1 ms at B = 1, 17.7 ms at B = 8, 21.5 ms at B = 101 by the
roofline). One line ``t0 + t1·B + t2·K`` misses that curve by up to 68 % (+26 % at the 101 decodes a vLLM run
measured), so :func:`pdplan.serving.roles.decode_perf` prices such a step as the minimum of two lines
(:func:`pdplan.serving.roles.concave_lines`, within 7 % there).

**Derivation.** Let ``τ(B, K) = min_i ℓ_i(B, K)``, ``ℓ_i = t0_i + t1_i·B + t2_i·K``. The mean field
(docs/queueing.md §2.2) solves ``τ̄ = τ(λE[n]τ̄, λE[W]τ̄)``; with ``g_i(τ) = t0_i + u_i·τ``, ``u_i = λ(t1_i E[n] +
t2_i E[W])``, the least fixed point of ``min_i g_i`` is ``min_i τ̄_i``, ``τ̄_i = t0_i/(1 − u_i)`` over the lines with
``u_i < 1``: below ``τ̄_i`` every ``g_i(τ) > τ``, and at ``τ* = min_i τ̄_i`` every ``g_i(τ*) ≥ τ*``, with equality
for the minimiser. So at each rate the law runs on one line, the one with the least τ̄_i, and its linearisation there
(the §2.4 load noise, the KV variance) is that line's own: the law's model at that rate *is* that line's model. A
colocated instance's ``τ̄ = t0/(1 − u_d − u_p)`` keeps the property (the riding prefill's u_p is the same on every
line). At a given rate N and K̄ are proportional to τ̄, so the least-τ̄ line also leaves the most room under every
mean bound (seats, KV): the law's stable limit is the largest of its lines'. Every line prices at least the law's τ̄
at every rate, so where a line meets the SLO the law does, and at a rate past every line's goodput the line the law
runs on misses it: the law's goodput is the largest of its lines' goodputs. :func:`best_line` searches each line's
model (a step of one line: the model as before) and keeps the best; :func:`line_at_rate` picks the line a given rate
runs on. The optimiser's screen (:mod:`pdplan.search.tables`) takes each rate's line the same way, and the simulator's
``linear`` step is the minimum itself at each iteration's batch (:mod:`pdplan.sim.deployment`). A plan's rows away
from its goodput (its operating point at a target rate, the report's rate curve, the sensitivity rows at rate ±20 %)
read each rate's own line (:mod:`pdplan.search.law_rows`, since 2026-12-07), with the hit rates of a prefix cache
kept at the plan's. Left out: the closed-loop benchmark's loops keep the one-line fit for their prefill-only steps
(their decode steps are the roofline's own per batch, :mod:`pdplan.benchmark`), and its mean-value fixed point runs
on the goodput's line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from pdplan.errors import NoFeasiblePlanError
from pdplan.perf.kv_blocks import resident_partial_block_tokens
from pdplan.queueing import decode_fixed_point
from pdplan.serving.cells import decode_cells
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import ColocatedHardware, DisaggregatedHardware, ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import DecodePerf, decode_perf

T = TypeVar("T")


def decode_role(res: ResolvedScenario[Any]) -> RoleHardware:
    """The instance type that decodes: a colocated instance, or an xPyD deployment's decode instance."""
    hw = res.hardware
    if isinstance(hw, ColocatedHardware):
        return hw.colocated
    if isinstance(hw, DisaggregatedHardware):
        return hw.decode
    raise TypeError(f"no decoding instance in hardware {type(hw).__name__}")


def role_decode_perf(res: ResolvedScenario[Any]) -> DecodePerf:
    """The decode step law of the bound deployment's decoding instance (:func:`~pdplan.serving.roles.decode_perf` on
    the workload's cells; the partial last KV block of its lengths), on line :attr:`ResolvedScenario.decode_line`
    where one is set and the law has lines (a line chosen for other lengths, a what-if's, where one line fits these:
    the one-line fit, which is then the law)."""
    hw = decode_role(res)
    cells = decode_cells(res)
    partial = resident_partial_block_tokens(cells.input_tokens, cells.decode_steps, cells.prob, hw.kv_block_tokens)
    perf = decode_perf(hw, cells.mean_work / cells.mean_steps, float(res.max_num_seqs), partial)  # kept by value
    if res.decode_line is None or not perf.lines:  # a line named for other lengths, where one line fits these
        return perf
    return perf.on_line(min(res.decode_line, len(perf.lines) - 1))


def line_count(res: ResolvedScenario[Any]) -> int:
    """How many lines the bound deployment's decode law has (0: one line fits, the law is its fit)."""
    if res.decode_line is not None:
        return 0
    return len(role_decode_perf(res).lines)


LineBound = float | Iterable[float]
"""An upper bound of a line's goodput (:func:`best_line`), or upper bounds computed lazily, cheapest first: the line
is skipped as soon as one of them does not exceed the best found (:func:`limit_bound`)."""


def best_line(
    res: ResolvedScenario[Any],
    search: Callable[[ResolvedScenario[Any]], T],
    rate_of: Callable[[T], float],
    bound: Callable[[ResolvedScenario[Any]], LineBound] | None = None,
) -> T:
    """``search(res)`` where the decode law is one line; else ``search`` on each line's scenario and the result with
    the highest ``rate_of`` (the law's goodput, module docstring). The lines are searched flattest first (the one a
    loaded instance runs on), and a later line is skipped where ``bound`` (an upper bound of its ``rate_of``: a
    model's stable limit; or bounds computed one by one, :data:`LineBound`) does not exceed the best found; on a tie
    the line searched first is kept. A line on which no rate holds is skipped; where none holds, the last error is
    raised."""
    count = line_count(res)
    if count == 0:
        return search(res)
    best: T | None = None
    failure: NoFeasiblePlanError | None = None
    for line in reversed(range(count)):
        on = dataclasses.replace(res, decode_line=line)
        if best is not None and bound is not None and _at_most(bound(on), rate_of(best)):
            continue
        try:
            got = search(on)
        except NoFeasiblePlanError as err:
            failure = err
            continue
        if best is None or rate_of(got) > rate_of(best):
            best = got
    if best is None:
        assert failure is not None
        raise failure
    return best


def _at_most(bounds: LineBound, best: float) -> bool:
    """Whether ``bounds`` (one, or several computed one by one) show a line's goodput cannot exceed ``best``; the
    later bounds of a sequence are not computed once one does."""
    if isinstance(bounds, float | int):
        return bounds <= best
    return any(b <= best for b in bounds)


def limit_bound(build: Callable[[ResolvedScenario[Any]], Any]) -> Callable[[ResolvedScenario[Any]], LineBound]:
    """:func:`best_line`'s ``bound`` for scenarios without a prefix cache: the stable limit of the model ``build``
    makes (no goodput exceeds it); None-like (infinite) with a cache, whose limit moves with the hit rates. A colocated
    model's decode-share cap (:meth:`~pdplan.serving.colocated.ColocatedModel.decode_rate_bound`, above its stable
    limit: every candidate of the limit lies below the utilisation root λ_u, itself below the cap) comes first: read
    from the step's line and the cells' means, it spares the limit's roots (the KV and seat admission queues, the
    utilisation and chunk-queue roots) where it already lies at or below the best line's goodput
    (examples/deepseek-v3-wide-ep.yaml: the steep line's cap 1.70-6.81 req/s against the flat line's goodput
    3.49-16.63 on all five colocated searches)."""

    def bound(res: ResolvedScenario[Any]) -> Iterator[float]:
        if res.cache is not None:
            yield float("inf")
            return
        try:
            model = build(res)
            if isinstance(model, ColocatedModel):
                yield model.decode_rate_bound()
            yield float(model.limit().rate_rps)
        except NoFeasiblePlanError:
            yield 0.0

    return bound


def line_at_rate(res: ResolvedScenario[Any], rate_rps: float, mean_step_s: Callable[[Any, float], float],
                 build: Callable[[ResolvedScenario[Any]], T]) -> T:  # fmt: skip
    """The model of ``res`` at ``rate_rps``: built on the line whose mean step there is the least (module docstring;
    ``mean_step_s(model, rate)``, inf past a line's stable range); the one-line model where the law is one line."""
    count = line_count(res)
    if count == 0:
        return build(res)
    models = [build(dataclasses.replace(res, decode_line=line)) for line in range(count)]
    return models[int(least_step_lines(models, np.array([rate_rps]), mean_step_s)[0])]


def least_step_lines(
    models: Sequence[T], rates_rps: np.ndarray, mean_step_s: Callable[[T, float], float]
) -> npt.NDArray[np.intp]:
    """Index into ``models`` (one per line of a law) of the line each rate runs on: the least mean step there
    (module docstring; ``mean_step_s`` inf past a line's stable range; where every line is past it, the first)."""
    if len(models) == 1:
        return np.zeros(len(rates_rps), dtype=np.intp)
    steps = np.array([[mean_step_s(m, float(r)) for r in rates_rps] for m in models])
    return np.asarray(np.argmin(steps, axis=0), dtype=np.intp)


def mean_decode_step_s(perf: DecodePerf, cells: Any, rate_per_instance: float) -> float:
    """τ̄ of a decode pool at a per-instance rate (inf past its stable range)."""
    try:
        return float(decode_fixed_point(np.array([rate_per_instance]), cells, perf.step).tau_mean_s[0])
    except ValueError:
        return float("inf")
