"""pdplan's colocated model against published open-loop vLLM runs (issue #23 item 4, "a published vLLM/SGLang
open-loop benchmark").

The runs (``benchmarks/data/vllm_open_loop.yaml``, every figure with its file and commit): a vLLM server on H100 SXM
(Llama-2-70B at TP4, Mixtral-8x7B at TP2; ``max_num_seqs`` 128, ``max_num_batched_tokens`` 2,048, ``max_model_len``
4,096) driven by inference-perf at fixed request rates of 5-20 req/s for 10-20 minutes each, prompts of 575-787
tokens and outputs of 245-250 (``ignore_eos``). For each run this script builds the same deployment as a pdplan
scenario (colocated, one instance, the ``chunked`` scheduler at the run's 2,048-token budget, its seat cap, bf16,
Poisson arrivals: inference-perf's ``constant`` load spaces its requests by exponential gaps, docs/reuse_workloads.md
§5; the traffic as the harness sent it: a fixed list of 10 x 10 prompts, each a group's system prompt plus its own
question, request n sending prompt n mod 100 (the data file says how that was read from the runs' own configs), so
that vLLM's prefix cache, on by default, serves every repeat but its last token; both lengths fixed at the run's
measured means) and compares

* pdplan's stable limit (and what sets it) with the run's rate: a run pdplan refuses is a run it says cannot be
  served, and the published one served it;
* at the run's rate, where pdplan admits it: TTFT mean / P50 / P99, the mean decode time per token and the mean E2E
  latency (pdplan: TTFT mean + (n - 1) x TPOT mean, n fixed) against the run's; the measured time per token is
  ``(E2E mean - TTFT mean)/(n - 1)`` (the data file says why inference-perf's own TPOT field is not used);
* pdplan's step price at the occupancy the run measured, as ``benchmarks/mlperf_server.py`` does: by Little's law a
  run holds ``N = λ (E2E - TTFT)`` decoding requests; pdplan's plain step there is ``τ_p = t0 + t1 N + t2 N K``
  (a MoE's concave step: the least of its lines there, pdplan/serving/decode_lines.py)
  (``K = L + (n - 1)/2``, the mean context of a decoding request with fixed lengths), the prefill takes the share
  ``u_p = λ(t_p L + A)`` (L the prompt tokens computed, after the prefix cache's hits at the run's rate), each prompt
  token at the width of a step that carries one beside the N decodes
  (pdplan/queueing/chunk_width.py), and the mean step is ``τ̄ = τ_p/(1 − u_p)`` (pdplan/queueing/chunk_window.py, module
  docstring), against the measured time per token. This checks the step model apart from the occupancy it predicts.

Two engine profiles are priced: ``vllm-0.18`` (async scheduling, on by default from about vLLM 0.14, so the nearer to
the 0.15.1 that issue #23 names for these runs) and ``vllm`` (0.12.0, without it). Nothing is fitted to these runs.
Run: ``python benchmarks/vllm_open_loop.py`` (a few seconds); it rewrites its section of docs/accuracy.md.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from doc_block import write_block

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import Evaluation, evaluate
from pdplan.io.catalog import open_catalog
from pdplan.queueing.chunk_width import step_price
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.decode_lines import role_decode_perf
from pdplan.serving.resolve import ColocatedHardware, resolve
from pdplan.serving.roles import prefill_split_s
from pdplan.specs.scenario import Scenario

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "vllm_open_loop.yaml"
DOC = REPO / "docs" / "accuracy.md"
SECTION = "vllm-open-loop"
ENGINES = ("vllm-0.18", "vllm")
"""The profiles priced, the nearer to the runs' vLLM first (module docstring)."""
LOOSE_SLO = {"ttft": 60.0, "tpot": 10.0, "percentile": 99}
"""The runs have no SLO: a loose one, so that the goodput is the stable limit and never an SLO."""


def load_data(path: Path = DATA) -> dict[str, Any]:
    """The published runs with their sources (the data file)."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def scenario(run: dict[str, Any], gpu: str, engine: str) -> Scenario:
    """The published deployment and run as a pdplan scenario (module docstring)."""
    return Scenario.model_validate(
        {
            "name": f"vllm-open-loop-{run['name']}",
            "model": run["model"],
            "mode": "colocated",
            "colocated": {
                "gpu": gpu,
                "tp": run["tp"],
                "count": 1,
                "scheduler": "chunked",
                "chunk_tokens": run["max_num_batched_tokens"],
            },
            "workload": workload(run),
            "slo": LOOSE_SLO,
            "dtype": "bf16",
            "kv_dtype": "bf16",
            "max_num_seqs": run["max_num_seqs"],
            "max_model_len": run["max_model_len"],
            "engine": engine,
        }
    )


def workload(run: dict[str, Any]) -> dict[str, Any]:
    """The run's traffic as inference-perf sent it (module docstring): a fixed list of G x U prompts, request i
    sending prompt i mod G.U, each a group's system prompt plus its own question; lengths fixed at the measured mean."""
    harness = run["harness_shared_prefix"]
    system = int(harness["system_prompt_len"])
    return {
        "name": run["name"],
        "arrival": "poisson",
        "shared_prefix": {
            "num_prefixes": int(harness["num_groups"]),
            "questions_per_prefix": int(harness["num_prompts_per_group"]),
            "prefix_tokens": {"dist": "fixed", "value": system},
            "question_tokens": {"dist": "fixed", "value": round(run["prompt_len"]["mean"]) - system},
            "output_tokens": {"dist": "fixed", "value": round(run["output_len"]["mean"])},
        },
    }


@dataclass(frozen=True)
class Measured:
    """The run's figures (seconds), the time per token derived from its means (module docstring)."""

    rate_rps: float
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    e2e_mean_s: float
    output_tokens: float

    @property
    def tpot_s(self) -> float:
        return (self.e2e_mean_s - self.ttft_mean_s) / (self.output_tokens - 1.0)

    @property
    def decoding(self) -> float:
        """Requests decoding at once by Little's law: rate x the mean time from first to last token."""
        return self.rate_rps * (self.e2e_mean_s - self.ttft_mean_s)


def measured(run: dict[str, Any]) -> Measured:
    t, e = run["ttft_s"], run["request_latency_s"]
    return Measured(
        float(run["achieved_rate"]), t["mean"], t["median"], t["p99"], e["mean"], float(run["output_len"]["mean"])
    )


@dataclass(frozen=True)
class Row:
    """One published run beside pdplan's figures for one engine profile."""

    run: dict[str, Any]
    engine: str
    scenario: Scenario
    limit: Evaluation
    at_rate: Evaluation | None
    """The closed form at the run's rate; None where that rate is beyond its stable limit."""

    @property
    def measured(self) -> Measured:
        return measured(self.run)

    @property
    def limit_error(self) -> float:
        """pdplan's stable limit / the run's rate − 1: negative means pdplan refuses a rate the run served."""
        return self.limit.stability_limit_rps / self.measured.rate_rps - 1.0

    def predicted_e2e_mean_s(self) -> float | None:
        if self.at_rate is None or self.at_rate.operating_point is None:
            return None
        op = self.at_rate.operating_point
        return op.ttft_s.mean + (self.scenario_output_tokens() - 1.0) * op.tpot_s.mean

    def scenario_output_tokens(self) -> float:
        return float(round(self.run["output_len"]["mean"]))

    def step_check(self) -> StepCheck:
        """pdplan's mean step at the decoding occupancy the run measured (module docstring, third bullet)."""
        m = self.measured
        n_dec = m.decoding
        context = round(self.run["prompt_len"]["mean"]) + (self.scenario_output_tokens() - 1.0) / 2.0
        perf = role_decode_perf(resolve(self.scenario, open_catalog()))  # a MoE's step: the minimum of its lines
        plain = float(perf.law_step_s(np.array(n_dec), np.array(n_dec * context)))
        riding, roofline = self._riding_prefill(n_dec)
        u_p = m.rate_rps * self._riding_s_per_request(n_dec)
        return StepCheck(n_dec, plain, u_p, plain / (1.0 - u_p), m.tpot_s, riding, roofline)

    def _riding_s_per_request(self, n_dec: float) -> float:
        """pdplan's prefill seconds per request riding the steps, at the run's occupancy: each prompt's tokens at the
        width of a step that carries one beside the N measured decodes (pdplan/queueing/chunk_width.py step_price,
        x = λ τ prompts arriving per measured step τ), plus its attention."""
        m = self.measured
        model = self._model()
        if model.gemm_width is None:
            raise TypeError(f"{self.run['name']}: the chunked model carries no GemmWidth")
        el = float(model.cells.prob @ model.cells.computed_tokens)
        x = np.array([m.rate_rps * m.tpot_s])
        t_p, _ = step_price(np.array([n_dec]), x, el, float(model.res.chunk_tokens), model.gemm_width)
        return float(t_p[0]) * el + float(model.cells.prob @ model.attention_cell_s)

    def _model(self) -> ColocatedModel:
        """The run's deployment with the prefix cache's hit rates at the run's rate."""
        res = dataclasses.replace(resolve(self.scenario, open_catalog()), cache_rate_rps=self.measured.rate_rps)
        model = build_model(res)
        if not isinstance(model, ColocatedModel):
            raise TypeError(f"{self.run['name']}: not a colocated deployment")
        return model

    def _riding_prefill(self, n_dec: float) -> tuple[float, float]:
        """The prompt tokens one measured step carries, ``c = λ τ L`` (λ the run's rate, τ its measured time per
        token, L the prompt), priced two ways by pdplan's own roofline: ``c t_p`` (the chunk price, the secant at the
        full budget, pdplan/serving/roles.py chunk_price) and ``G(N + c) − G(N)`` (what c more tokens add to the
        GEMM side of a pass that already carries the N decode tokens: the step's own width, below the GEMM ridge
        partly riding on the weight read). Seconds per step."""
        m = self.measured
        res = resolve(self.scenario, open_catalog())
        model = self._model()
        if not isinstance(res.hardware, ColocatedHardware):
            raise TypeError(f"{self.run['name']}: not a colocated deployment")
        c = m.rate_rps * m.tpot_s * float(model.cells.prob @ model.cells.computed_tokens)
        g, _ = prefill_split_s(res.hardware.colocated, np.array([n_dec, n_dec + c]))
        return c * model.prefill_s_per_token, float(g[1] - g[0])


@dataclass(frozen=True)
class StepCheck:
    """Little's law occupancy of the run and pdplan's mean step priced there."""

    decoding: float
    plain_step_s: float
    """t0 + t1 N + t2 N K: pdplan's decode step without the prefill riding on it."""
    prefill_share: float
    """u_p: the share of time pdplan gives the prefill at the run's rate and measured occupancy (the prompt tokens at
    the width of the steps that carry them, :meth:`Row._riding_s_per_request`)."""
    step_s: float
    """(t0 + t1 N + t2 N K)/(1 − u_p)."""
    measured_tpot_s: float
    riding_chunk_price_s: float
    """The prompt tokens a measured step carries at pdplan's chunk price, c t_p (:meth:`Row._riding_prefill`)."""
    riding_roofline_s: float
    """The same tokens as G(N + c) − G(N), the step's own GEMM width (:meth:`Row._riding_prefill`)."""

    @property
    def error(self) -> float:
        return self.step_s / self.measured_tpot_s - 1.0

    @property
    def plain_error(self) -> float:
        """The plain step alone against the measured step (what the prefill share adds is the rest)."""
        return self.plain_step_s / self.measured_tpot_s - 1.0


def compare(run: dict[str, Any], gpu: str, engine: str) -> Row:
    """The closed form's stable limit and, where it admits the rate, its latencies at the run's rate."""
    sc = scenario(run, gpu, engine)
    limit = evaluate(sc)
    try:
        at_rate: Evaluation | None = evaluate(sc, rate=float(run["achieved_rate"]))
    except NoFeasiblePlanError:
        at_rate = None
    return Row(run, engine, sc, limit, at_rate)


def _pct(x: float) -> str:
    return f"{100.0 * x:+.1f} %"


def limit_line(r: Row) -> str:
    m = r.measured
    return (
        f"| {r.run['name']} | {r.engine} | {m.rate_rps:.2f} | {r.limit.stability_limit_rps:.2f} "
        f"({_pct(r.limit_error)}) | {r.limit.stability_binding} |"
    )


def latency_line(r: Row) -> str:
    m, ms = r.measured, 1000.0
    meas = (
        f"{m.ttft_mean_s * ms:.0f} / {m.ttft_p50_s * ms:.0f} / {m.ttft_p99_s * ms:.0f} | {m.tpot_s * ms:.1f} | "
        f"{m.e2e_mean_s:.2f}"
    )
    e2e = r.predicted_e2e_mean_s()
    if r.at_rate is None or r.at_rate.operating_point is None or e2e is None:
        pred = f"beyond pdplan's stable limit ({r.limit.stability_limit_rps:.2f} req/s) | — | —"
    else:
        t, p = r.at_rate.operating_point.ttft_s, r.at_rate.operating_point.tpot_s
        pred = (
            f"{t.mean * ms:.0f} / {t.p50 * ms:.0f} / {t.p99 * ms:.0f} ({_pct(t.mean / m.ttft_mean_s - 1)}, "
            f"{_pct(t.p99 / m.ttft_p99_s - 1)}) | {p.mean * ms:.1f} ({_pct(p.mean / m.tpot_s - 1)}) | "
            f"{e2e:.2f} ({_pct(e2e / m.e2e_mean_s - 1)})"
        )
    return f"| {r.run['name']} | {r.engine} | {m.rate_rps:.2f} | {meas} | {pred} |"


def step_line(r: Row) -> str:
    c, ms = r.step_check(), 1000.0
    return (
        f"| {r.run['name']} | {r.engine} | {c.decoding:.0f} | {c.plain_step_s * ms:.1f} ({_pct(c.plain_error)}) | "
        f"{c.prefill_share:.2f} | {c.step_s * ms:.1f} | {c.measured_tpot_s * ms:.1f} | {_pct(c.error)} | "
        f"{c.riding_chunk_price_s * ms:.1f} / {c.riding_roofline_s * ms:.1f} |"
    )


LIMIT_HEADER = (
    "| run | profile | run's rate (req/s) | pdplan's stable limit (req/s, vs the rate) | binding |\n"
    "|---|---|---|---|---|"
)
LATENCY_HEADER = (
    "| run | profile | rate (req/s) | measured TTFT mean / P50 / P99 (ms) | measured time per token (ms) | measured "
    "E2E mean (s) | pdplan TTFT mean / P50 / P99 (ms; mean, P99 error) | pdplan TPOT mean (ms) | pdplan E2E mean "
    "(s) |\n"
    "|---|---|---|---|---|---|---|---|---|"
)
STEP_HEADER = (
    "| run | profile | decoding (Little) | pdplan plain step (ms) | pdplan prefill share u_p | pdplan step "
    "τ_p/(1 − u_p) (ms) | measured (ms) | step error | a measured step's prompt tokens: c·t_p / G(N + c) − G(N) "
    "(ms) |\n|---|---|---|---|---|---|---|---|---|"
)


def render(rows: list[Row], data: dict[str, Any], seconds: float) -> str:
    src = data["source"]
    return f"""Generated by `python benchmarks/vllm_open_loop.py` from `benchmarks/data/vllm_open_loop.yaml`
({src["repository"]} at `{src["commit"][:12]}`, licence: {src["licence"]}; vLLM on {src["gpu"]}, inference-perf)
in {seconds:.0f} s. Errors are pdplan / measured − 1.

Stable limit against the run's rate (a negative error: pdplan refuses a rate the real server served):

{LIMIT_HEADER}
{chr(10).join(limit_line(r) for r in rows)}

At the run's rate (closed form; TTFT in ms, time per token in ms, E2E in s):

{LATENCY_HEADER}
{chr(10).join(latency_line(r) for r in rows)}

pdplan's step at the decoding occupancy each run measured (Little's law), with and without the prefill's share:

{STEP_HEADER}
{chr(10).join(step_line(r) for r in rows)}
"""


def write_section(text: str, section: str = SECTION) -> None:
    """Replace the block between this section's markers in docs/accuracy.md (the markers must be there)."""
    write_block(DOC, section, text)


def main() -> None:
    start = time.perf_counter()
    data = load_data()
    gpu = data["source"]["gpu"]
    rows = [compare(run, gpu, engine) for run in data["runs"] for engine in ENGINES]
    text = render(rows, data, time.perf_counter() - start)
    print(text)
    write_section(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
