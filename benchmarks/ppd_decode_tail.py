"""Where ``ppd-geo-think``'s Turn 2+ TTFT tail comes from (docs/prefix_cache.md §11, Left; issue #24 item 6).

One case of :mod:`reuse_closed_form_vs_sim` (``ppd-geo-think``: geometric sessions, lognormal appends and outputs,
exponential think time of 5 s, ``ppd`` on 1P2D) at a nominal rate, per seed:

* the simulator's Turn 2+ split into the turns that ran on decode (their first token at their prefill's end) and the
  turns whose history the decode instance no longer held, and the decode turns' TTFT and computed tokens (their
  prompt less the history their decode instance held) by prompt length;
* the closed form at the rate that run offered: its decode rows (the ``decode`` class's rows of every prompt bin)
  and its Turn 2+ (:func:`pdplan.serving.ppd_report.turn_weights`), by the same prompt lengths;
* a Monte Carlo of one decode instance, busy, its steps back to back: a plain step τ_p plus the work of the appends
  that arrived during the step before (each admitted at the next boundary), an append's TTFT its wait for that
  boundary, then the step that carries it (τ_p, its own work and the others'). The appends arrive at λ_a = ρ_a/E[w]
  (the closed form's ρ_a and τ') with the work ``append_work_s`` of the simulated decode turns' own (computed,
  held) tokens, drawn at random: with every append's work as drawn; with the steps' lengths at the mean work of the
  appends they carry (the step in flight as the closed form's two-point law takes it); with the others in the
  tagged append's own step at the mean; with both (the two-point law the closed form took before its mixed steps'
  law). The engine's host time is left out of the Monte Carlo;
* the closed form's law of the same quantity, ``R + O + τ_p + w`` (:meth:`pdplan.serving.ppd_boundary.StepBoundary.
  carried` at the same λ_a, τ' and ρ_a with the same work, its own w drawn), with the mixed steps' law and the others'
  work as drawn, and as the two-point law with the others at the mean.

Run: ``python benchmarks/ppd_decode_tail.py [--rate 40.15] [--seeds 0,1,2] [--requests 8000]``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
import reuse_closed_form_vs_sim as grid

from pdplan.cache.lru_closed_form import ThinkTime
from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.queueing import decode_fixed_point
from pdplan.serving.append_price import append_work_s
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.ppd_boundary import AppendWork, StepBoundary
from pdplan.serving.ppd_report import placement_of, turn_weights, weighted_quantile
from pdplan.serving.resolve import resolve
from pdplan.sim import reuse as sim_reuse
from pdplan.sim.compare import WARMUP_FRACTION
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.types import FloatArray

CASE = "ppd-geo-think"
LENGTHS = ((0.0, 1000.0), (1000.0, 3000.0), (3000.0, float("inf")))
"""Prompt-length ranges (tokens) the decode turns are split by."""
VARIANTS = (
    ("every append as drawn", False, False),
    ("steps at the mean work", True, False),
    ("own step's others at the mean", False, True),
    ("both at the mean", True, True),
)
"""The Monte Carlo's variants: (label, the steps' lengths at the mean work, the own step's others at the mean)."""


def _ms(x: FloatArray) -> str:
    return f"mean {1e3 * x.mean():.2f}, P50 {1e3 * np.percentile(x, 50):.2f}, P90 {1e3 * np.percentile(x, 90):.2f} ms"


def simulated(rate: float, seed: int, requests: int) -> dict[str, Any]:
    """The simulation's decode turns and the rest of Turn 2+ (module docstring), with the placer's held tokens."""
    sc = grid.scenario(CASE, "affinity", False, "1P2D")
    model = build_model(resolve(sc, open_catalog()))
    inputs = reuse_inputs(model, rate)
    caught: dict[str, Any] = {}
    module: Any = sim_reuse  # the placer's per-turn held tokens are not part of the result: caught on their way
    original = module.placed_turns

    def catch(run: Any, extra: Any, turn: Any, m: Any, placer: Any, order: Any, *rest: Any) -> Any:
        caught["placer"], caught["order"] = placer, order
        return original(run, extra, turn, m, placer, order, *rest)

    module.placed_turns = catch
    try:
        res = sim_reuse.simulate_reuse(model, sc.workload, inputs.layout, rate_rps=rate, routing=inputs.routing,
                                       exposed_load_s=inputs.exposed_load_s, n_requests=requests, seed=seed,
                                       step="linear", warmup_fraction=WARMUP_FRACTION, placement=inputs.placement,
                                       turn_latency_s=None)  # fmt: skip
    finally:
        module.placed_turns = original
    run, warm = res.run, res.run.warmup_count
    later = res.turn[warm:] >= 2
    on_decode = later & ((run.first_token_s - run.prefill_done_s)[warm:] == 0.0)
    held = np.asarray(caught["placer"].work.hit_tokens, dtype=np.float64)[caught["order"]][warm:]
    prompt = run.input_tokens[warm:].astype(np.float64)
    return {"offered": res.offered_rps, "ttft": res.ttft_s[warm:], "later": later, "decode": on_decode,
            "prompt": prompt, "computed": prompt - held, "held": held, "model": model}  # fmt: skip


def closed(offered: float) -> tuple[Any, FloatArray, FloatArray, FloatArray, Any]:
    """The closed form at ``offered``: (its TTFT mixture, decode rows' weights, Turn 2+ weights, bin lengths, the
    placement)."""
    sc = grid.scenario(CASE, "affinity", False, "1P2D")
    ev = evaluate(sc, rate=offered)
    assert ev.cache is not None
    model: Any = build_model(with_cache_rate(resolve(sc, open_catalog()), offered))
    p = placement_of(model)
    assert p is not None
    rate = min(p.rate_rps, 0.999 * model.limit().rate_rps)
    inner = model.snapshot(np.array([rate])).ttft.inner
    k = model.res.lengths.input_tokens.size
    rows = np.asarray(model.bin_prob, dtype=np.float64).reshape(k, -1)
    decode = np.zeros_like(rows)
    decode[:, -1] = rows[:, -1]
    _, turn2 = turn_weights(model, p)
    return inner, decode, turn2, model.res.lengths.input_tokens, p


def monte_carlo(work: FloatArray, rate_per_s: float, plain_s: float, flight_mean: bool, own_mean: bool,
                seconds: float) -> FloatArray:  # fmt: skip
    """Appends' TTFT on one busy decode instance (module docstring), host time left out; ``flight_mean``: the steps'
    lengths (so the step in flight's) with the appends they carry at the mean work, ``own_mean``: the other appends
    in the tagged one's step at the mean work."""
    rng = np.random.default_rng(1)
    n = int(rng.poisson(rate_per_s * seconds))
    arrival = np.sort(rng.uniform(0.0, seconds, n))
    w = rng.choice(work, n)
    mean = float(work.mean())
    ttft = np.full(n, np.nan)
    start, first, carried = 0.0, 0, np.zeros(0, dtype=np.intp)
    while first < n or carried.size:
        total = float(w[carried].sum())
        end = start + plain_s + (carried.size * mean if flight_mean else total)
        for j in carried:
            rest = (carried.size - 1) * mean if own_mean else total - w[j]
            ttft[j] = (start - arrival[j]) + plain_s + w[j] + rest
        last = int(np.searchsorted(arrival, end, side="left"))
        carried, first, start = np.arange(first, last), last, end
    return ttft


def closed_law(work: FloatArray, rate_per_s: float, tau_s: float, rho: float, two_point: bool) -> FloatArray:
    """``(mean, P50, P90)`` of the closed form's ``R + O + τ_p + w`` on one busy instance (module docstring): the law
    of :meth:`StepBoundary.carried` at a long think time (a random arrival, as the Monte Carlo's), w drawn from
    ``work`` independent of it; ``two_point``: the mixed steps at their mean and the others at the mean work."""
    law = AppendWork(work, np.ones(work.size))
    if two_point:
        law = AppendWork.point(float(work.mean()))
    b = StepBoundary.of(tau_s, rho, rate_per_s, 1.0, ThinkTime("exponential", 1e4), law, 1 if two_point else 16)
    carried = b.carried()
    a = np.linspace(0.0, carried.span_s + b.plain_s + float(work.max()), 4001)
    own = np.random.default_rng(2).choice(work, 4000)
    cdf = np.mean([np.interp(a - b.plain_s - w, carried.grid_s, carried.cdf_grid, left=0.0) for w in own], axis=0)
    mean = carried.mean_s + b.plain_s + float(own.mean())
    return np.array([mean, np.interp(0.5, cdf, a), np.interp(0.9, cdf, a)])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=40.15, help="nominal rate, req/s")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--requests", type=int, default=8000)
    args = parser.parse_args(argv)
    for seed in (int(s) for s in args.seeds.split(",")):
        s = simulated(args.rate, seed, args.requests)
        inner, decode, turn2, lengths, p = closed(s["offered"])
        later, dec = s["later"], s["decode"]
        print(f"seed {seed}: offered {s['offered']:.4g} req/s; simulated Turn 2+ P90 "
              f"{1e3 * np.percentile(s['ttft'][later], 90):.2f} ms, closed "
              f"{1e3 * weighted_quantile(inner.cdf_per_bin, turn2, 0.9):.2f} ms")  # fmt: skip
        off = later & ~dec
        print(f"  Turn 2+ off decode: simulated {off.sum() / later.sum():.2%} ({_ms(s['ttft'][off])}), closed "
              f"{1.0 - float(p.held[1:] @ p.turn_share[1:]) / float(p.turn_share[1:].sum()):.2%}")  # fmt: skip
        weights = decode.ravel() / decode.sum()
        print(f"  decode turns: simulated {_ms(s['ttft'][dec])}; closed P50 "
              f"{1e3 * weighted_quantile(inner.cdf_per_bin, weights, 0.5):.2f}, P90 "
              f"{1e3 * weighted_quantile(inner.cdf_per_bin, weights, 0.9):.2f} ms")  # fmt: skip
        for lo, hi in LENGTHS:
            sel = dec & (s["prompt"] >= lo) & (s["prompt"] < hi)
            part = np.where(((lengths >= lo) & (lengths < hi))[:, None], decode, 0.0).ravel()
            print(f"    prompt {lo:.0f}-{hi:.0f}: simulated {sel.sum() / dec.sum():.1%} of them, computing "
                  f"{s['computed'][sel].mean():.0f} tokens, TTFT P90 {1e3 * np.percentile(s['ttft'][sel], 90):.2f} "
                  f"ms; closed {part.sum() / decode.sum():.1%}, TTFT P90 "
                  f"{1e3 * weighted_quantile(inner.cdf_per_bin, part / part.sum(), 0.9):.2f} ms")  # fmt: skip
        model = s["model"]
        batch = float(decode_fixed_point(s["offered"] / model.y, model.cells, model.decode.step).mean_seqs[0])
        work, _ = append_work_s(model.res.hardware.decode, batch, s["computed"][dec], s["held"][dec],
                                model.res.chunk_tokens)  # fmt: skip
        rate_a = p.rho_append / p.work_s  # λ_a per decode instance: ρ_a = λ_a·E[w]
        tau_prime = -np.log1p(-p.steps_with_append) / rate_a  # q = 1 − e^{−λ_a τ'}
        plain = tau_prime * (1.0 - p.rho_append)
        print(f"  Monte Carlo (E[w] {1e3 * work.mean():.2f} ms, P90 {1e3 * np.percentile(work, 90):.2f} ms; "
              f"tau' {1e3 * tau_prime:.1f} ms):")  # fmt: skip
        for label, flight, own in VARIANTS:
            print(f"    {label}: {_ms(monte_carlo(work, rate_a, plain, flight, own, 4000.0))}")
        for label, two in (("mixed steps' law, others as drawn", False), ("two-point law, others at the mean", True)):
            m, p50, p90 = 1e3 * closed_law(work, rate_a, float(tau_prime), p.rho_append, two)
            print(f"  closed form's law, {label}: mean {m:.2f}, P50 {p50:.2f}, P90 {p90:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
