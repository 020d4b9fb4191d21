"""PPD where the decode instance's history cache binds: the closed form's held histories against the simulator's
(issue #24 item 6; docs/prefix_cache.md §11, *Held histories under cache pressure*).

The deployment: Qwen3-30B-A3B 1P1D on H100, decode TP1 DP4/EP4 (four ranks, each its own session KV), sessions of fixed
turns, new and output tokens, exponential think times, ``turn_placement: {policy: ppd}`` (``--policy score``: PPD's
score rule) under session-affine decode routing (the case of ``tests/unit/test_ppd_dp.py`` with longer think times). The
simulator (:func:`pdplan.sim.reuse.simulate_reuse`, own-latency stationary start, seed 0, warm-up 0.2) at a nominal
rate; the closed form (:func:`pdplan.serving.build.model_at_rate`) at the rate the run offered. Per case: the share of
all turns placed on decode and of Turn 2+ whose history the decode rank held, the closed form's characteristic time T_C
of a rank's history LRU (:func:`pdplan.cache.lru_closed_form.session_cache` on its free KV, as
:func:`pdplan.serving.ppd.held_probability` takes it) against the run's warm-up and counted window, a rank's free KV
(the simulator's sampled at every resize of a rank's cache, :meth:`pdplan.sim.decode_cache.DecodeKvCache.resize`,
wrapped here, past the first fifth of the samples) against the closed form's mean, the Turn 2+ held share in the counted
window's first and last fifth (the cache's warm-up: the stationary start touches the histories of the sessions in
progress into the caches, not the last histories of sessions finished before t = 0, which hold a steady cache's room for
T_C), TTFT P90 of Turn 1 and Turn 2+, TPOT mean.

Cases: (a) 4 turns of 600 new / 100 output tokens, 60 s think, 30 req/s, the 3,000-request run of the issue and one
of 12,000; (b) 20 turns of 3,000 new / 100 output tokens, 60 s think, 2 req/s: turn k's prompt and output are
3,100·k tokens, beyond Qwen3-30B-A3B's 40,960-token window from turn 14 on, so the simulator ends every session after
13 turns (:mod:`pdplan.sim.reuse_sessions`, ``truncated_sessions``) and offers 13/20 of the nominal rate, where the
closed form keeps the 20 turns (their prompts clipped to the window in its length bins, ``resolve``'s warning); and
the same sessions at 13 turns, at 1.3 req/s (the truncated run's sessions' rate) and 2 req/s; (c) the case of
``tests/unit/test_ppd_cache_pressure.py``, 4 turns of 2,000 new / 100 output tokens, 20 s think, 20 req/s, 4,000
requests. A second table splits Turn 2+ by where it ran.

Run: ``python benchmarks/ppd_cache_pressure.py [--cases a3k,a12k,b20,b13,b13x,c20] [--policy ppd|score]`` (about 35 s
of CPU for all on this machine; prints two Markdown tables).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import pdplan.sim.decode_cache as decode_cache
import pdplan.sim.reuse as sim_reuse
import pdplan.sim.turn_stats as turn_stats
from pdplan.cache.lru_closed_form import session_cache
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model, model_at_rate, with_cache_rate
from pdplan.serving.ppd import decode_session_workload, turns_pmf
from pdplan.serving.ppd_report import placement_of, ppd_report, turn_weights, weighted_quantile
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.sim.reuse_setup import reuse_inputs


@dataclass(frozen=True)
class Case:
    turns: int
    new_tokens: int
    output_tokens: int
    think_s: float
    rate_rps: float
    requests: int


CASES = {
    "a3k": Case(4, 600, 100, 60.0, 30.0, 3000),
    "a12k": Case(4, 600, 100, 60.0, 30.0, 12000),
    "b20": Case(20, 3000, 100, 60.0, 2.0, 3000),
    "b13": Case(13, 3000, 100, 60.0, 1.3, 3000),
    "b13x": Case(13, 3000, 100, 60.0, 2.0, 3000),
    "c20": Case(4, 2000, 100, 20.0, 20.0, 4000),
}


def resolved(case: Case, policy: str = "ppd") -> ResolvedScenario[Any]:
    """The case's scenario (module docstring)."""

    def fixed(n: int) -> dict[str, Any]:
        return {"dist": "fixed", "value": n}

    think = {"dist": "exponential", "mean": f"{case.think_s}s"}
    sessions = {"turns": fixed(case.turns), "new_tokens": fixed(case.new_tokens),
                "output_tokens": fixed(case.output_tokens), "think_time": think, "system_prompt_tokens": 0}  # fmt: skip
    doc: dict[str, Any] = {
        "schema_version": 1, "name": "ppd-cache-pressure", "model": "qwen3-30b-a3b", "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "dp": 4, "ep": 4, "count": 1},
        "link": "ib-ndr", "granularity": "layer", "routing": "least-loaded", "engine": "vllm",
        "workload": {"sessions": sessions},
        "cache": {"prefix_caching": True, "routing": "affinity", "turn_placement": {"policy": policy}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }  # fmt: skip
    return resolve(scenario_from_dict(doc, source="benchmark", base_dir=Path(".")), open_catalog())


class Probe:
    """The simulator's rank caches' free KV at every resize, and the run's placer (wrapped, module docstring)."""

    def __init__(self) -> None:
        self.free: list[float] = []
        self.placer: Any = None
        self.order: Any = None
        resize, placed = decode_cache.DecodeKvCache.resize, turn_stats.placed_turns

        def on_resize(cache: decode_cache.DecodeKvCache, free_tokens: float) -> None:
            self.free.append(free_tokens)
            resize(cache, free_tokens)

        def on_placed(run: Any, extra: Any, turn: Any, model: Any, placer: Any, order: Any, *rest: Any) -> Any:
            self.placer, self.order = placer, order
            return placed(run, extra, turn, model, placer, order, *rest)

        setattr(decode_cache.DecodeKvCache, "resize", on_resize)  # noqa: B010 (a method wrapped: mypy checks setattr less)
        setattr(sim_reuse, "placed_turns", on_placed)  # noqa: B010 (the name pdplan.sim.reuse calls)


def measure(name: str, case: Case, probe: Probe, policy: str = "ppd") -> dict[str, Any]:
    """One case's row (module docstring)."""
    res = resolved(case, policy)
    model = build_model(res)
    inputs = reuse_inputs(model, case.rate_rps)
    probe.free.clear()
    t0 = time.process_time()
    run = inputs.simulate(
        model, res.scenario.workload, rate_rps=case.rate_rps, n_requests=case.requests,
        seed=0, warmup_fraction=0.2, turn_latency_s=None,
    )  # fmt: skip
    sim_cpu = time.process_time() - t0
    offered = run.offered_rps
    closed = model_at_rate(with_cache_rate(res, offered), offered)
    placement, report = placement_of(closed), ppd_report(res, closed)
    assert placement is not None
    assert report is not None
    assert run.turns is not None
    assert res.cache is not None
    sessions = res.cache.reuse.sessions
    assert sessions is not None
    turns = turns_pmf(sessions)
    workload = decode_session_workload(sessions, placement.rate_rps, turns)
    t_c = session_cache(workload, placement.free_tokens, instances=placement.domains, partial_hits=False)
    warm = run.run.warmup_count
    held = probe.placer.held[probe.order][warm:]
    turn, ttft = run.turn[warm:], run.ttft_s[warm:]
    arrival = run.run.arrival_s[warm:]
    later = turn > 1
    fifths = np.percentile(arrival[later], [20, 80])
    free = np.asarray(probe.free[len(probe.free) // 5 :])
    reach = np.cumsum(turns[::-1])[::-1]  # the closed form's Turn 2+ held share: f_k over the turns reached
    return {
        "case": name, "requests": case.requests, "offered": offered, "max_turn": int(turn.max()),
        "window": run.run.window_s, "t_c": t_c.characteristic_time_s, "sim_cpu": sim_cpu,
        "share": (run.turns.share_on_decode, placement.share_on_decode),
        "held2": (float(held[later].mean()), float(reach[1:] @ placement.held[1:] / reach[1:].sum())),
        "held2_first_last": (float(held[later & (arrival < fifths[0])].mean()),
                             float(held[later & (arrival > fifths[1])].mean())),
        "free": (float(free.mean()), float(np.percentile(free, 10)), float(np.percentile(free, 90)),
                 placement.free_tokens),
        "ttft1": (float(np.percentile(ttft[turn == 1], 90)), report.ttft_turn1_p90_s),
        "ttft2": (float(np.percentile(ttft[later], 90)), report.ttft_turn2_p90_s),
        "tpot": (float(np.nanmean(run.run.tpot_s[warm:])),
                 float(closed.snapshot(np.array([offered])).tpot_summary(90)[0].mean)),
        **_split(run, probe, closed, placement),
    }  # fmt: skip


def _split(run: Any, probe: Probe, closed: Any, placement: Any) -> dict[str, tuple[float, float]]:
    """Turn 2+ apart by where it ran: TTFT P90 on decode and on the prefill pool, and the share of those on the
    prefill pool that hit the prefill caches (the closed form's: its left turns' hit share per prompt bin,
    :attr:`pdplan.serving.ppd_pool.TurnPlacement.prefill_hits`, over the bins' Turn 2+ prefill-side weights)."""
    warm = run.run.warmup_count
    on = probe.placer.on_decode[probe.order][warm:]
    later, ttft = run.turn[warm:] > 1, run.ttft_s[warm:]
    hit = np.asarray(run.hit_tokens)[warm:] > 0
    rate = min(placement.rate_rps, 0.999 * closed.limit().rate_rps)
    inner = closed.snapshot(np.array([rate])).ttft.inner
    weights = turn_weights(closed, placement)[1].reshape(closed.res.lengths.input_tokens.size, -1)
    decode, prefill = np.zeros_like(weights), weights.copy()
    decode[:, -1], prefill[:, -1] = weights[:, -1], 0.0
    left = prefill.sum(axis=1)
    found = placement.prefill_hits
    closed_hit = math.nan if found is None else float(found.fraction @ left / left.sum())
    return {
        "ttft2_decode": (float(np.percentile(ttft[later & on], 90)),
                         weighted_quantile(inner.cdf_per_bin, (decode / decode.sum()).ravel(), 0.9)),
        "ttft2_prefill": (float(np.percentile(ttft[later & ~on], 90)),
                          weighted_quantile(inner.cdf_per_bin, (prefill / prefill.sum()).ravel(), 0.9)),
        "prefill_hit2": (float(hit[later & ~on].mean()), closed_hit),
    }  # fmt: skip


def _pair(x: tuple[float, float], fmt: str = ".3f") -> str:
    return f"{x[0]:{fmt}} / {x[1]:{fmt}}"


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as one Markdown table (simulator / closed form in each pair)."""
    head = (
        "| case | requests | offered req/s | turns run | counted window s | T_C s | on decode sim / closed | "
        "Turn 2+ held sim / closed | held in first / last fifth | free KV a rank sim mean (P10–P90) / closed, K | "
        "TTFT P90 T1 s | TTFT P90 T2+ s | TPOT mean ms |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        f = r["free"]
        w = r["window"]
        lines.append(
            f"| {r['case']} | {r['requests']:,} | {r['offered']:.2f} | {r['max_turn']} | {w[0]:.0f}–{w[1]:.0f} | "
            f"{r['t_c']:.1f} | {_pair(r['share'])} | {_pair(r['held2'])} | {_pair(r['held2_first_last'])} | "
            f"{f[0] / 1e3:.0f} ({f[1] / 1e3:.0f}–{f[2] / 1e3:.0f}) / {f[3] / 1e3:.0f} | {_pair(r['ttft1'])} | "
            f"{_pair(r['ttft2'])} | {r['tpot'][0] * 1e3:.2f} / {r['tpot'][1] * 1e3:.2f} |"
        )
    split = "| case | Turn 2+ on decode: TTFT P90 s | on the prefill pool: TTFT P90 s | those hitting a prefill cache |"
    lines += ["", split, "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {_pair(r['ttft2_decode'])} | {_pair(r['ttft2_prefill'])} | ")
        lines[-1] += f"{_pair(r['prefill_hit2'])} |"
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--policy", default="ppd", choices=["ppd", "score"], help="the turn placement's policy")
    args = parser.parse_args()
    probe = Probe()
    rows = []
    for name in args.cases.split(","):
        rows.append(measure(name, CASES[name], probe, args.policy))
        print(f"{name}: simulated in {rows[-1]['sim_cpu']:.1f} CPU s", flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
