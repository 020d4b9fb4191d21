"""PPD on 157-turn agent sessions (examples/agent-dualpath.yaml with ``turn_placement: ppd``; issue #24): DeepSeek-V3
on 2P4D B200 nodes, decode DP8/EP8, the agent-dualpath-64k sessions (253 new tokens over a history of up to 67K
tokens, 11.6 s think time), DualPath or prefill-only reads of a 3FS pool.

Each append costs its decode instance w ≈ 0.07 s (253 GEMM rows and their attention over a ~33K history,
:func:`pdplan.serving.append_price.append_work_s`), so at 60 req/s (15 appends/s per instance) the appends alone take
ρ_a ≈ 0.94 of it. The cache-rate bisection probes such rates; there the step stretched by 1/(1 − ρ_a) had its
fixed point sought at the *plain* step's capacity (none: an infinite step, the decode rows' offsets 0·∞ = NaN, 0 %
attainment at every rate) and the probe's 'cannot be met at any rate' ended the search instead of failing the
probe. The plan is priced: TPOT binds (each step stretched by the appends)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.queueing import decode_fixed_point
from pdplan.serving.build import build_model, goodput_model, model_at_rate, with_cache_rate
from pdplan.serving.decode_lines import role_decode_perf
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.dual_path_setup import StorageReadStage, read_residual_s
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.ppd_decode import decode_at, decode_side, scaled
from pdplan.serving.ppd_pool import PpdPool
from pdplan.serving.ppd_report import ppd_report
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.serving.roles import decode_step_fn

ROOT = Path(__file__).parents[2]


def _resolved(tmp_path: Path, policy: str = "ppd", read_paths: str = "dual") -> ResolvedScenario[Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "agent-dualpath.yaml").read_text())
    doc["cache"] |= {"read_paths": read_paths, "turn_placement": {"policy": policy}}
    path = tmp_path / f"agent-{policy}-{read_paths}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return resolve(load_scenario(path), open_catalog())


def _model(res: ResolvedScenario[Any], rate_rps: float) -> DisaggregatedModel:
    model = build_model(with_cache_rate(res, rate_rps))
    assert isinstance(model, DisaggregatedModel)
    return model


def test_a_step_stretched_past_the_plain_capacity_is_clamped_at_its_own(tmp_path: Path) -> None:
    plain = _model(_resolved(tmp_path, policy="pd"), 60.0)
    step = scaled(plain.decode.step, 0.936)  # ρ_a at 60 req/s, capped at DECODE_U_MAX: the step × 1/(1 − 0.85)
    assert step.t0_s == pytest.approx(plain.decode.step.t0_s / (1.0 - DECODE_U_MAX), rel=1e-12)
    _, cap = decode_side(plain, step)
    # the stretched step's capacity is below 60 req/s (4 instances) and below the plain step's
    assert 4 * cap.utilisation_rate_per_s < 60.0
    assert cap.utilisation_rate_per_s < plain.capacity.utilisation_rate_per_s
    at = decode_at(plain, 60.0, step)
    # at 0.99 of that capacity, per instance: the fixed point there (it was sought at the plain capacity: none, ∞)
    fixed = decode_fixed_point(np.array([0.99 * cap.utilisation_rate_per_s]), plain.cells, step)
    assert math.isfinite(at.tau_s)
    assert at.tau_s == pytest.approx(float(fixed.tau_mean_s[0]), rel=1e-12)
    assert decode_at(plain, 60.0, step, cap) == at  # the capacity passed is the one it finds


def test_past_the_decodes_range_the_ppd_model_is_finite(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the 0·∞ of the decode rows' offsets
        model = _model(_resolved(tmp_path), 60.0)
    pool = model.pool
    assert isinstance(pool, PpdPool)
    p = pool.placement
    assert p is not None
    # the appends' work summed, λ_a·E[w] ≈ 0.92, is past the decode's utilisation cap: the first fixed point of the
    # settling (pdplan/serving/ppd_ranks.py) is the capped step's. On eight ranks side by side they take 0.65.
    assert 60.0 * p.share_on_decode / model.y * p.work_s > DECODE_U_MAX
    assert p.rho_append == pytest.approx(0.653, abs=0.01)
    assert np.all(np.isfinite(pool.point_latency_s))
    assert math.isfinite(p.boundary.mean_s)
    # the model holds at no rate near 60 req/s: its decode (the step stretched by the cap) saturates well below
    assert model.limit().rate_rps < 60.0


@pytest.mark.parametrize("read_paths", ["dual", "prefill"])
def test_agent_ppd_is_priced_and_tpot_binds(tmp_path: Path, read_paths: str) -> None:
    res = _resolved(tmp_path, read_paths=read_paths)
    slo = res.scenario.slo
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        at, model, good = goodput_model(res, slo)
    assert isinstance(model, DisaggregatedModel)
    assert isinstance(model.pool, PpdPool)
    p = model.pool.placement
    assert p is not None
    # self-consistent: the hit rates' (and the appends' load's) rate is the goodput, within the bisection's tolerance
    assert good.rate_rps == pytest.approx(float(at.cache_rate_rps or 0.0), rel=0.01)
    # every Turn 2+ appended on decode (the decode KV holds the histories at this rate): the prefill pool is idle
    assert p.share_on_decode > 0.97
    # ceiling: the appends alone fill the decode instances at y / (s_D·E[w]) (4 instances)
    assert good.rate_rps < 4.0 / (p.share_on_decode * p.work_s)
    assert p.rho_append < DECODE_U_MAX
    assert good.binding == "TPOT at P90"
    snap = model.snapshot(np.array([good.rate_rps]))
    assert float(snap.attainment(slo.ttft, slo.tpot)[0]) >= slo.attainment - 1e-3
    assert float(snap.tpot_reported.quantile(0.9)[0]) <= slo.tpot * 1.001


def test_read_residual_by_hand() -> None:
    # rows: a miss (reads nothing), a hit read at 0.1 s or 0.3 s (its two points), PPD's decode row (nothing)
    transfer = np.array([[0.0, 0.0], [0.1, 0.3], [0.0, 0.0]])
    prob = np.array([0.2, 0.5, 0.3])
    # E[t] ∝ 0.5·(0.1 + 0.3) = 0.2, E[t²] ∝ 0.5·(0.01 + 0.09) = 0.05; X = (v/S)·t with v/S = 0.5:
    # E[X²]/(2E[X]) = 0.5·0.05/(2·0.2) = 0.0625
    assert read_residual_s(transfer, prob, 0.5) == pytest.approx(0.0625, rel=1e-12)
    assert read_residual_s(np.zeros((2, 2)), np.array([0.5, 0.5]), 1.0) == 0.0
    # the rows that read nothing (the decode row) wait for no SNIC
    stage = StorageReadStage(transfer, 0.0625, (0.02, 0.01), 0.0, 1, 0.5, np.array([1.0, 1.0, 0.0]))
    assert stage.fixed_s(3)[:, 0] == pytest.approx([0.0, 0.1, 0.0], rel=1e-12)
    law = stage.wait_law(np.array([25.0]), 3)  # W_PE = 0.5/0.5·0.0625
    assert law.bin_mean_s[0] == pytest.approx([0.0625, 0.0625, 0.0], rel=1e-12)
    assert law.weights[0, 2, 0] == 1.0  # the decode row: an atom 1 at 0


def test_only_the_prefill_pool_turns_load_the_storage_nics(tmp_path: Path) -> None:
    plain, ppd = _model(_resolved(tmp_path, policy="pd"), 20.0), _model(_resolved(tmp_path), 20.0)
    before, after = plain.storage_read, ppd.storage_read
    assert before is not None
    assert after is not None
    assert isinstance(ppd.pool, PpdPool)
    p = ppd.pool.placement
    assert p is not None
    # the pool's only hit tier is the 3FS pool (HBM hits nothing here), so the SNICs' load per req/s is plain
    # disaggregation's times the prefill-side rows' hit tokens per request over plain's: Σ_b P'(b, h)·hit'(b, h) over
    # the hit classes at their placed hit tokens (the decode class, last, reads nothing)
    assert ppd.cache is not None
    assert plain.cache is not None
    assert [t.token_hit_ratio for t in ppd.cache.tiers if t.name == "hbm"] == [0.0]
    k, h = plain.cache.weights.shape
    hits = plain.cache.hit_tokens[:, 1:]
    placed_hits = np.sum(ppd.bin_prob.reshape(k, h + 1)[:, 1:h] * ppd.cache.hit_tokens[:, 1:h])
    share = float(placed_hits / np.sum(plain.bin_prob.reshape(k, h)[:, 1:] * hits))
    assert 0.0 < share < 0.05  # Turn 1 reads nothing; a turn whose history its decode instance no longer holds does
    for b, a in zip(before.snic_utilisation_per_rps, after.snic_utilisation_per_rps, strict=True):
        assert a == pytest.approx(b * share, rel=1e-9)
    assert after.residual_s == pytest.approx(read_residual_s(after.transfer_s, ppd.bin_prob, after.fetch_over_snic))
    # the decode rows (a turn appended on the decode instance holding its session) read nothing
    rows = np.flatnonzero(ppd.pool.decode_rows)
    assert np.all(after.fixed_s(ppd.bin_prob.size)[rows, :] == 0.0)
    assert np.all(after.wait_law(np.array([20.0]), ppd.bin_prob.size).points_s[0, rows, :] == 0.0)


def _agent_sessions(tmp_path: Path, think: dict[str, Any]) -> ResolvedScenario[Any]:
    """The example with ``turn_placement: ppd`` and its preset's sessions written out, the think time ``think``."""
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "agent-dualpath.yaml").read_text())
    doc.pop("search", None)
    doc["cache"] |= {"turn_placement": {"policy": "ppd"}}
    doc["workload"] = {
        "sessions": {
            "turns": {"dist": "fixed", "value": 157},
            "new_tokens": {"dist": "fixed", "value": 253},
            "output_tokens": {"dist": "fixed", "value": 176},
            "think_time": think,
            "system_prompt_tokens": 0,
        }
    }
    path = tmp_path / f"agent-ppd-{think['dist']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return resolve(load_scenario(path), open_catalog())


@pytest.mark.parametrize(
    "think", [{"dist": "fixed", "value": "11.6s"}, {"dist": "exponential", "mean": "11.6s"}], ids=lambda t: t["dist"]
)
def test_only_turn_1_is_left_on_the_prefill_pool(tmp_path: Path, think: dict[str, Any]) -> None:
    # 157 turns of 253 new and 176 output tokens: turn t's prompt is 253 + 429·(t − 1) tokens, Turn 1 is 1/157 of
    # the requests. At 20 req/s every Turn 2+ history is held on decode and ppd places it there, so the prefill pool
    # serves Turn 1 alone: bin 0 (prompts below its upper edge of 3,148.75 tokens: turns 1–7) has 6/7 of its requests
    # on decode, every other bin all of them. Before, the bins' shares read the placed mass on one token grid (step 5:
    # 255 + 175 tokens a turn) over all the mass on another (step 2: 252 + 176), and the two bins where a turn
    # crossed an edge between them kept 1/8 and 1/6 on the prefill pool: 49K- and 64K-token misses, 1.2 % of the
    # requests, which took the pool to 0.24 utilisation and Turn 1's TTFT P90 to 1.44 s with the exponential think.
    model = _model(_agent_sessions(tmp_path, think), 20.0)
    assert isinstance(model.pool, PpdPool)
    p = model.pool.placement
    assert p is not None
    assert np.all(p.held[1:] == 1.0)
    expected = np.ones(p.decode_by_bin.size)
    expected[0] = 6.0 / 7.0
    assert p.decode_by_bin == pytest.approx(expected, abs=1e-6)
    k = model.res.lengths.input_tokens.size
    rows = model.bin_prob.reshape(k, -1)
    assert float(rows[:, :-1].sum()) == pytest.approx(1.0 / 157.0, rel=1e-6)  # the prefill side: Turn 1 alone
    assert float(rows[0, 0]) == pytest.approx(1.0 / 157.0, rel=1e-6)  # bin 0, a miss (no system prompt)
    report = ppd_report(model.res, model)
    assert report is not None
    # Turn 1: a 253-token prefill (bin 0's points go to 2,666 tokens, ≤ 0.06 s), the link and the decode boundary on
    # an idle pool; the simulator's P90 is 0.25 s (docs/prefix_cache.md §11)
    assert report.ttft_turn1_p90_s < 0.3


def test_appends_sharing_a_step_and_their_count_per_request_are_priced(tmp_path: Path) -> None:
    # issue #24 item 6. The simulator (`pdplan/sim/decode_append.py`) at nominal 20 req/s with the exponential think
    # time and the sessions' start at their own turn latency (5.11 s; 8,000 requests, seed 0,
    # benchmarks/agent_ppd_vs_sim.py): on 2026-12-07 (offered 18.108 req/s) 21.0 % of appends shared their mixed
    # step with another (0.26 others on average), TPOT mean / P90 28.93 / 33.35 ms, Turn 2+ TTFT P90 0.290 s. Before,
    # the closed form priced each append alone in a step of the mean length τ' and every request's steps stretched
    # alike: TPOT P90 29.23 ms (−12 %), Turn 2+ 0.242 s (−16 %). With each append on its session's DP rank (the
    # slowest rank sets a mixed step, pdplan/sim/append_ranks.py; the closed form's others in an append's step those
    # of its own rank, pdplan/serving/ppd_boundary.py), offered 17.57 req/s: 18.1 % sharing (0.21 others), Turn 2+
    # TTFT P90 0.242 s, TPOT mean / P90 32.26 / 37.41 ms. The closed form here was built with `build_model`, which
    # without a decode line prices the one-line fit of the concave decode law (next test): TPOT 27.28 / 31.01 ms
    # (−15 / −17 %), while the simulator's `linear` step is the law, the minimum of its two lines at each iteration's
    # batch. On the line the law runs on at this rate (`model_at_rate`, as `pdplan evaluate` prices a rate: line 0,
    # plain step 23.4 ms at 25.7 sequences an instance): TPOT 33.91 / 39.34 ms (+5.1 / +5.2 %), Turn 2+ TTFT P90
    # 0.248 s (+2.6 %), 19.5 % sharing (0.23 others). Both sides on the one-line fit (`--one-line`, offered 18.43
    # req/s): TPOT 28.15 / 32.11 ms against 27.05 / 30.40 ms (+4.1 / +5.6 %): the gap was the step law. The +5 % left
    # is mostly appends of different ranks sharing a step, priced as a sum where the simulator's step takes the
    # slowest rank (ρ_a 0.299 against 0.274; docs/prefix_cache.md §11, *The agent's TPOT gap*). Since the overlap
    # scheduler's extra iteration (SGLang, k = 1; pdplan/serving/ttft.py `overlap_s`, pdplan/sim/overlap_lag.py): the
    # closed form's Turn 2+ TTFT P90 0.282 s (a constant shift by k·τ'), the simulator's, whose appends now wait for the
    # end of the next iteration as its other first tokens do, 0.314 s: −10.2 %, past the 10 % by a fifth of a
    # point (the next iteration is a mixed step, ~68 ms, with probability about ρ_a, which the constant shift leaves
    # out of the tail; TTFT P99 −9.8 %, Turn 1 −0.3 %). Since the next step is priced as a plain step τ_p with
    # probability 1 − ρ_a or one carrying append work, τ_p + τ', with probability ρ_a (mean τ' kept), coupled to the
    # TTFT (pdplan/serving/ttft.py `overlap_append_steps`): Turn 2+ P90 0.305 s (−2.8 %), P99 0.377 s (−3.9 %), Turn 1
    # P90 0.307 against 0.284 s (+8.0 %, ~50 requests), the mean TTFT unchanged; held to the 10 %. Since the
    # appends of different ranks in one step run side by side (the slowest rank's own parts plus every append's
    # experts, a balls-in-bins expectation over the step before's two-point law: pdplan/serving/ppd_ranks.py),
    # ρ_a 0.299 → 0.281 against 0.274, τ' 33.41 → 32.13 ms against 31.61: TPOT 32.62 / 37.79 ms (+1.1 / +1.0 %),
    # held to 3 %; Turn 2+ TTFT P90 0.298 s (−5.1 %: the long next iteration's probability ρ_a fell with it).
    rate = 17.57
    model = model_at_rate(
        with_cache_rate(_agent_sessions(tmp_path, {"dist": "exponential", "mean": "11.6s"}), rate), rate
    )
    assert isinstance(model, DisaggregatedModel)
    assert model.res.decode_line == 0  # the steep line: the least mean step at this rate
    assert isinstance(model.pool, PpdPool)
    p = model.pool.placement
    assert p is not None
    noise = model.append_noise
    assert noise is not None
    assert noise.appends_per_request == pytest.approx(p.share_on_decode / model.y, rel=1e-12)
    assert noise.rho == p.rho_append
    assert noise.work_sq_s2 >= p.work_s**2  # E[w²] ≥ E[w]²
    tpot = model.snapshot(np.array([rate])).tpot_summary(90)[0]
    report = ppd_report(model.res, model)
    assert report is not None
    assert tpot.mean == pytest.approx(0.03226, rel=0.03)  # +1.1 % (+5.1 % with the ranks' appends summed)
    assert float(tpot.at_percentile) == pytest.approx(0.03741, rel=0.03)  # +1.0 % (+5.2 %)
    assert p.rho_append == pytest.approx(0.2744, rel=0.04)  # +2.5 % (+8.8 %)
    assert report.ttft_turn2_p90_s == pytest.approx(0.3138, rel=0.10)  # −5.1 % (−2.8 % summed, −10.2 % constant shift)


def test_the_agent_decode_step_is_its_law_not_the_one_line_fit(tmp_path: Path) -> None:
    # DeepSeek-V3 FP8 on a B200 DP8/EP8 decode instance: the step is concave in the batch (expert reads saturate), so
    # the law is the minimum of two lines (pdplan/serving/decode_lines.py). At 20 sequences of 33,800 tokens (the
    # batch and mean context these runs hold an instance; 676,000 tokens in all) the roofline gives 22.38 ms, the law
    # 21.45 ms (line 0: 14.47 + 0.3019·20 + 1.395e-6·676,000 ms), the one-line fit 18.84 ms (16.22 + 0.0510·20 +
    # 2.374e-6·676,000 ms): 16 % low. A closed form on the one-line fit therefore priced TPOT 15–17 % below a
    # simulator stepping on the law.
    res = _agent_sessions(tmp_path, {"dist": "exponential", "mean": "11.6s"})
    perf = role_decode_perf(res)
    assert len(perf.lines) == 2
    batch = np.array([20.0])
    context = batch * 33_800.0
    roof = float(decode_step_fn(res.hardware.decode, batch, context)[0])
    law = float(perf.law_step_s(batch, context)[0])
    one = float(perf.step(batch, context)[0])
    line0 = perf.lines[0]
    assert law == pytest.approx(line0.t0_s + 20.0 * line0.t1_s_per_seq + 676_000.0 * line0.t2_s_per_token, rel=1e-12)
    assert roof == pytest.approx(0.02238, rel=0.01)
    assert law == pytest.approx(0.02145, rel=0.01)
    assert one == pytest.approx(0.01884, rel=0.01)
    assert one < 0.86 * roof < law
