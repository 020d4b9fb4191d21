"""PPD's prefill pool under cache pressure, piece by piece: the simulator's against the closed form's (issue #24 item 6;
docs/prefix_cache.md §11, *The prefill pool's TTFT, piece by piece*).

The cases of :mod:`ppd_cache_pressure` (the same deployment, workloads, seeds and runs). The simulator is instrumented,
not changed: :class:`pdplan.sim.prefill.DispatchedPrefill`'s ``submit`` and ``_start`` are wrapped to record each
prompt's arrival at the prefill pool, its start and its priced service; the run's own arrays give the end of its
prefill, its admission on decode and its first token. Per counted request sent to the prefill pool (every Turn 1, and
the Turn 2+ misses under ``ppd``): the pool's busy fraction (the run's :class:`pdplan.sim.metrics.PoolStats`), the
pool's arrival rate and its prompts' mean length, the service's mean and squared coefficient of variation, the FCFS
wait's mean and P90, the time from the prefill's end to the first token, and TTFT P90, Turn 1 and Turn 2+ apart.

The closed form's pieces at the rate the run offered: the pool's load (:meth:`pdplan.serving.prefill_pool.PrefillPool.
load`), its thinned rate ``λ·(1 − s_D)``, the prompt law of its rows (the quadrature points under ``point_prob``), the
service's mean and c², the FCFS wait of :func:`pdplan.serving.ttft.prefill_wait` on those rows (the wait
:class:`pdplan.serving.ppd_pool.PpdPool` convolves with the decode side's arrival law), and the TTFT P90 of the Turn 1
and the prefill-side Turn 2+ rows.

Run: ``python benchmarks/ppd_pool_pieces.py [--cases a12k,b13,b13x,c20]`` (about the CPU of ppd_cache_pressure.py).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
from ppd_cache_pressure import CASES, Case, Probe, resolved

import pdplan.sim.prefill as sim_prefill
from pdplan.serving.build import build_model, model_at_rate, with_cache_rate
from pdplan.serving.ppd_report import placement_of, turn_weights, weighted_quantile
from pdplan.serving.ttft import prefill_wait
from pdplan.sim.reuse_setup import reuse_inputs


class PoolProbe:
    """Each prompt's arrival at the prefill pool, start and service (module docstring): the last run's."""

    def __init__(self) -> None:
        self.submit: dict[int, float] = {}
        self.start: dict[int, tuple[float, float]] = {}
        submit, start = sim_prefill.DispatchedPrefill.submit, sim_prefill.DispatchedPrefill._start
        init = sim_prefill.DispatchedPrefill.__init__

        def on_init(pool: Any, *args: Any) -> None:
            self.submit, self.start = {}, {}
            init(pool, *args)

        def on_submit(pool: Any, req: int, now_s: float) -> None:
            self.submit[req] = now_s
            submit(pool, req, now_s)

        def on_start(pool: Any, inst: int, now_s: float) -> None:
            req = pool.queues[0 if pool.central else inst][0]
            start(pool, inst, now_s)
            self.start[req] = (now_s, pool.service_of[req])

        setattr(sim_prefill.DispatchedPrefill, "__init__", on_init)  # noqa: B010
        setattr(sim_prefill.DispatchedPrefill, "submit", on_submit)  # noqa: B010
        setattr(sim_prefill.DispatchedPrefill, "_start", on_start)  # noqa: B010


def _stats(x: np.ndarray) -> tuple[float, float, float]:
    """(mean, c², P90)."""
    m = float(x.mean())
    return m, float(x.var() / m**2) if m > 0 else 0.0, float(np.percentile(x, 90))


def simulated(case: Case, probe: Probe, pool: PoolProbe, seed: int = 0) -> tuple[dict[str, Any], Any, float]:
    """The simulator's pieces (module docstring) and the model and offered rate for the closed form."""
    res = resolved(case)
    model = build_model(res)
    inputs = reuse_inputs(model, case.rate_rps)
    run = inputs.simulate(
        model, res.scenario.workload, rate_rps=case.rate_rps, n_requests=case.requests,
        seed=seed, warmup_fraction=0.2, turn_latency_s=None,
    )  # fmt: skip
    warm, order = run.run.warmup_count, probe.order
    ids = order[warm:]
    on = probe.placer.on_decode[order][warm:]
    turn, r = run.turn[warm:], run.run
    pre = ~on
    submit = np.array([pool.submit.get(int(i), np.nan) for i in ids])
    start = np.array([pool.start.get(int(i), (np.nan, np.nan))[0] for i in ids])
    service = np.array([pool.start.get(int(i), (np.nan, np.nan))[1] for i in ids])
    ttft = run.ttft_s[warm:]
    after = ttft - (start - submit) - service - (submit - r.arrival_s[warm:])
    window = r.window_s[1] - r.window_s[0]
    held = probe.placer.held[order][warm:]
    lam, svc = float(pre.sum()) / window, service[pre]
    pk = lam * float(np.mean(svc**2)) / (2.0 * (1.0 - lam * float(svc.mean())))
    gaps = np.diff(np.sort(submit[pre]))
    out: dict[str, Any] = {
        "offered": run.offered_rps, "util": r.pool("prefill").utilisation, "rate": float(pre.sum()) / window,
        "tokens": float(r.input_tokens[warm:][pre].mean()), "hit": float(np.asarray(run.hit_tokens)[warm:][pre].mean()),
        "pre_queue": float(np.nanmean(submit[pre] - r.arrival_s[warm:][pre])), "pk_wait": pk,
        "ca2": float(gaps.var() / gaps.mean() ** 2), "lag1": float(np.corrcoef(gaps[:-1], gaps[1:])[0, 1]),
        "held_by_turn": [round(float(held[turn == k].mean()), 3) for k in range(2, int(turn.max()) + 1)],
    }  # fmt: skip
    for name, mask in (("all", pre), ("t1", pre & (turn == 1)), ("t2", pre & (turn > 1))):
        out[name] = {
            "share": float(mask.sum() / pre.sum()), "service": _stats(service[mask]),
            "wait": _stats(start[mask] - submit[mask]), "after": _stats(after[mask]),
            "ttft_p90": float(np.percentile(ttft[mask], 90)), "tokens": float(r.input_tokens[warm:][mask].mean()),
            "xfer": _stats((r.decode_admit_s - r.prefill_done_s)[warm:][mask]),
            "first": _stats((r.first_token_s - r.decode_admit_s)[warm:][mask]),
            "host": _stats(run.ttft_extra_s[warm:][mask]),
        }  # fmt: skip
    return out, res, run.offered_rps


def closed(res: Any, offered: float) -> dict[str, Any]:
    """The closed form's pieces at the offered rate (module docstring)."""
    model = model_at_rate(with_cache_rate(res, offered), offered)
    placement = placement_of(model)
    assert placement is not None
    pool = model.pool
    rate = min(offered, 0.999 * model.limit().rate_rps)
    prob, service = pool.point_prob, pool.point_service_s.ravel()
    cols = pool.bin_prob.size // res.lengths.input_tokens.size
    points = np.repeat(res.input_points, cols, axis=0).ravel()
    thinned = rate * pool.prefill_share
    wait = prefill_wait(pool.routing, np.array([thinned]), service, prob, pool.instances, arrival_ca2=pool.arrival_ca2)
    grid = wait.cdf_grid[0]
    p90 = float(wait.h_s[0] * np.searchsorted(grid, 0.9))
    mean_s = float(prob @ service)
    first, later = turn_weights(model, placement)
    later = later.reshape(res.lengths.input_tokens.size, -1).copy()
    later[:, -1] = 0.0
    later = later.ravel() / later.sum()
    inner = model.snapshot(np.array([rate])).ttft.inner

    def ttft_mean(weights: np.ndarray) -> float:
        top = weighted_quantile(inner.cdf_per_bin, weights, 0.9999)
        grid_s = np.linspace(0.0, top, 401)
        cdf = np.array([inner.cdf_per_bin(float(t))[0] for t in grid_s])  # [T, rows]
        return float(np.trapezoid(1.0 - cdf, grid_s, axis=0) @ weights)

    law = placement.arrival
    arrival = (math.nan, math.nan) if law is None else (law.mean_s, float(np.interp(0.9, law.cdf_grid, law.grid_s)))

    def row_service(weights: np.ndarray) -> tuple[float, float]:
        w = np.repeat(weights, service.size // weights.size) / (service.size // weights.size)
        m = float(w @ service)
        return m, float(w @ service**2 / m**2 - 1.0)

    return {
        "util": float(pool.load(np.array([rate]))[0]), "rate": thinned, "tokens": float(prob @ points),
        "service": (mean_s, float(prob @ service**2 / mean_s**2 - 1.0)), "wait": (float(wait.mean_s[0]), p90),
        "ca2": pool.arrival_ca2, "t1_service": row_service(first), "t2_service": row_service(later),
        "ttft1": weighted_quantile(inner.cdf_per_bin, first, 0.9),
        "ttft2": weighted_quantile(inner.cdf_per_bin, later, 0.9),
        "t1_after_mean": ttft_mean(first) - float(wait.mean_s[0]) - row_service(first)[0],
        "t2_after_mean": ttft_mean(later) - float(wait.mean_s[0]) - row_service(later)[0],
        "arrival_law": arrival,
        "held_by_turn": [round(float(x), 3) for x in placement.held[1:]],
    }  # fmt: skip


HEAD = (
    "| case (requests, seed) | offered req/s | Turn 2+ held | pool req/s | pool arrivals c², lag-1 | "
    "pool prompt, tokens | pool busy | "
    "service mean s (c²) | wait mean s: sim / P-K at the sim's λ, E[S²] / closed | wait P90 s | after prefill, mean s "
    "(T1) | KV ready to decode admission P90 s / closed arrival law P90 | TTFT P90 T1 s | TTFT P90 T2+ (pool) s |"
)


def _row(name: str, requests: int, seed: int, sim: dict[str, Any], cf: dict[str, Any]) -> str:
    """One Markdown row: simulator / closed form in each pair."""
    held = float(np.mean(sim["held_by_turn"])), float(np.mean(cf["held_by_turn"]))
    s1, t1 = sim["t1"], sim["t2"]
    cells = [
        f"{name} ({requests:,}, {seed})", f"{sim['offered']:.3f}", f"{held[0]:.3f} / {held[1]:.3f}",
        f"{sim['rate']:.3f} / {cf['rate']:.3f}", f"{sim['ca2']:.2f}, {sim['lag1']:+.3f}",
        f"{sim['tokens']:,.0f} / {cf['tokens']:,.0f}",
        f"{sim['util']:.3f} / {cf['util']:.3f}",
        f"{sim['all']['service'][0]:.4f} ({sim['all']['service'][1]:.2f}) / {cf['service'][0]:.4f} "
        f"({cf['service'][1]:.2f})",
        f"{sim['all']['wait'][0]:.4f} / {sim['pk_wait']:.4f} / {cf['wait'][0]:.4f}",
        f"{sim['all']['wait'][2]:.3f} / {cf['wait'][1]:.3f}",
        f"{s1['after'][0]:.4f} / {cf['t1_after_mean']:.4f}",
        f"{s1['xfer'][2]:.4f} / {cf['arrival_law'][1]:.4f}",
        f"{s1['ttft_p90']:.3f} / {cf['ttft1']:.3f}", f"{t1['ttft_p90']:.3f} / {cf['ttft2']:.3f}",
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="a12k,b13,b13x,c20")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--requests", type=int, default=0, help="override the case's requests (0: the case's)")
    args = parser.parse_args()
    probe, pool = Probe(), PoolProbe()
    rows: list[str] = []
    for name in args.cases.split(","):
        case = CASES[name]
        if args.requests:
            case = Case(case.turns, case.new_tokens, case.output_tokens, case.think_s, case.rate_rps, args.requests)
        sim, res, offered = simulated(case, probe, pool, args.seed)
        cf = closed(res, offered)
        rows.append(_row(name, case.requests, args.seed, sim, cf))
        print(f"{name}: done", flush=True)
    print("\n".join([HEAD, "|" + "---|" * (HEAD.count("|") - 1), *rows]))


if __name__ == "__main__":
    main()
