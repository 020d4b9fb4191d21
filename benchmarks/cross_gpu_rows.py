"""The end-to-end rows of both GPUs of AIConfigurator's silicon sample as pdplan rows, and their pricing under any
engine profile (for ``benchmarks/cross_gpu_accuracy.py``).

Rows (``aiconfigurator-silicon/{h100_sxm,h200_sxm}.csv`` via ``benchmarks/data_root.py``):

* dense colocated (``mode`` agg) rows of the catalogue's dense models, read as ``benchmarks/engine_accuracy.py``
  reads them (its model names, plus NVIDIA's FP8 checkpoint of Llama-3.1-8B that only the H200 rows use: the same
  architecture, FP8 weights), priced with :func:`pdplan.calibrate.silicon_rows.dense_scenario` on the row's GPU;
* MoE colocated rows and every disaggregated row, read by ``benchmarks/moe_rows.py`` (deployment, benchmark
  concurrency, client connection cap, decode seats) and priced with its ``scenario_dict``;
* colocated rows with attention DP (``attention_dp_size`` D > 1) are priced as run, D attention-DP ranks
  (:mod:`pdplan.serving.colocated_dp`), where ``tp_size · D = moe_ep_size``: the TensorRT-LLM DeepSeek-R1 TP1 DP8
  EP8 rows of the 2026-03-25 H200 dump, one 8-GPU node (``benchmarks/colocated_dp_rows.py`` prices the same rows
  with their per-rank seats). The same measurements appear again in the 2026-04-06 and ``db-dump`` H200 rows with
  ``attention_dp_size`` 64 and EP 8 on TP1 (same TTFT and TPOT: a column scaling, as ``benchmarks/moe_rows.py``
  describes for MiniMax-M2.5); they are left out as copies, not priced twice. The vLLM MiniMax-M2.5 rows whose
  ``attention_dp_size`` does not make ``tp · D = ep`` keep ``moe_rows``' reading (attention DP 1, the id's EP).

Each scenario is the one those scripts build, with the row's own GPU (``h100-sxm`` or ``h200-sxm``: its kernel table
and datasheet) in every role. The engine profile is the row's version's (:data:`VERSION_PROFILES`: ``vllm-0.18`` for
vLLM 0.18 rows, ``sglang-0.5.9`` for SGLang 0.5.6 to 0.5.9 rows, else the engine's shipped default) unless the caller
names another profile file (a refitted trial profile). ``benchmarks/engine_accuracy.py`` (the H100 tables of
docs/accuracy_engines.md) keeps ``moe_rows.VERSION_PROFILES``, vLLM's alone.

Pricing is ``engine_accuracy.predict``'s (:func:`pdplan.calibrate.silicon_rows.aic_benchmark`: aiperf's 20·C
measured requests after 2·C warm-up, the client's connection cap): on the H100 rows with the shipped profiles it
reproduces ``docs/accuracy_engines.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import moe_rows
import numpy as np
from client_connections import client_ttft_s
from data_root import calibration_path
from engine_accuracy import MODELS
from moe_rows import moe_rows as read_moe_rows
from moe_rows import scenario_dict

from pdplan.calibrate import silicon_rows
from pdplan.errors import PdplanError, SpecError
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.io.engines import version_has_prefix
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.resolve import resolve

SILICON = {
    "h100": ("aiconfigurator-silicon/h100_sxm.csv", "h100-sxm"),
    "h200": ("aiconfigurator-silicon/h200_sxm.csv", "h200-sxm"),
}
"""GPU label → (calibration file, pdplan GPU name)."""
VERSION_PROFILES: dict[tuple[str, str], str] = {
    **moe_rows.VERSION_PROFILES,
    **{("sglang", v): "sglang-0.5.9" for v in ("0.5.6", "0.5.7", "0.5.8", "0.5.9")},
}
"""(engine, version prefix) → the profile its rows are priced with (issue #23 item 3: each row on its own version's
profile); the rest with the engine's default. SGLang 0.5.6 to 0.5.9 share the rule the ``sglang-0.5.9`` profile
holds (PR #10975's ``mem_fraction_static`` formula, merged 2025-09-27, before all four; docs/engines.md §4.2);
0.5.1.post1 rows keep ``sglang``."""


def profile_of(row: dict[str, Any]) -> str:
    """The engine profile a row is priced with (:data:`VERSION_PROFILES`, else the engine's own name)."""
    for (engine, prefix), profile in VERSION_PROFILES.items():
        if row["engine"] == engine and version_has_prefix(str(row["version"]), prefix):
            return profile
    return str(row["engine"])


DENSE = {**MODELS, "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b"}
"""Dense catalogue models: engine_accuracy's, and NVIDIA's FP8 Llama-3.1-8B checkpoint (H200 vLLM 0.12.0 rows)."""


def dense_rows(path: Path) -> list[dict[str, Any]]:
    """The colocated dense rows of :data:`DENSE` (:func:`pdplan.calibrate.silicon_rows.dense_rows`)."""
    return silicon_rows.dense_rows(path, DENSE)


def harness(source: str) -> str:
    """A short name for the dump a row comes from (``silicon_data_source``): ``gap-analysis`` (AIC's per-engine gap
    analysis CSVs), ``db-dump`` (the 2026-04-27 database dump), or the dated CSV's name."""
    if source.startswith("db-dump"):
        return "db-dump"
    first = source.split(";")[0].replace("source_file=", "")
    return "gap-analysis" if "aic-auto-gap-analysis" in first else first


def read_gpu(gpu: str) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """(rows, rows that cannot be read with the reason) of one GPU's CSV; each row carries ``gpu``, ``kind`` (dense,
    moe, disagg), ``profile`` and ``harness``."""
    relative, gpu_name = SILICON[gpu]
    path = calibration_path(relative)
    sources = {r["id"]: r["silicon_data_source"] for r in csv.DictReader(path.open(newline=""))}
    rows = [{**r, "kind": "dense"} for r in dense_rows(path)]
    more, skipped = read_moe_rows(path)
    for r in more:
        dense_model = r["model"] in DENSE.values()
        rows.append({**r, "kind": "disagg" if r["mode"] == "disagg" else ("dense" if dense_model else "moe")})
    out = []
    for r in rows:
        r.update(gpu=gpu, gpu_name=gpu_name, profile=profile_of(r), harness=harness(sources[r["id"]]))
        if r["concurrency"] is None or r.get("c_inferred"):
            skipped.append((r, "no recorded benchmark concurrency"))
            continue
        out.append(r)
    return out, [({**r, "gpu": gpu}, why) for r, why in skipped]


def attention_dp(row: dict[str, Any]) -> bool:
    """Whether a colocated row runs attention DP as pdplan prices it: D = ``dp`` > 1 ranks of ``tp`` GPUs whose
    ``tp·D`` GPUs are the expert-parallel group (module docstring)."""
    return row.get("mode") == "agg" and row.get("dp", 1) > 1 and row["tp"] * row["dp"] == row["ep"]


def row_scenario(row: dict[str, Any], engine_ref: str | None = None) -> dict[str, Any]:
    """The scenario of one row on its own GPU, under ``engine_ref`` (a profile name or YAML path; None: the row's)."""
    moe = "prefill" in row or "ep" in row
    spec = scenario_dict(row) if moe else silicon_rows.dense_scenario(row, row["gpu_name"])
    if attention_dp(row):
        spec["colocated"]["dp"] = row["dp"]
    elif row.get("engine") == "trtllm" and row.get("mode") == "agg" and row.get("dp", 1) > 1:
        # left in the row list (and out of the priced rows) so that every k-th row stays the row it was
        raise SpecError(
            f"attention_dp_size {row['dp']} at TP{row['tp']} EP{row['ep']}: a column-scaled copy of a TP1 DP8 EP8 "
            "row (benchmarks/cross_gpu_rows.py docstring)"
        )
    for role in ("colocated", "prefill", "decode"):
        if role in spec:
            spec[role] = {**spec[role], "gpu": row["gpu_name"]}
    spec["engine"] = engine_ref or row["profile"]
    return spec


def price(row: dict[str, Any], catalog: Catalog, engine_ref: str | None = None) -> tuple[float, float]:
    """Predicted mean (TTFT, TPOT) in ms of one row (``engine_accuracy.predict``'s benchmark); NaN where pdplan
    cannot evaluate the row (the reason: :func:`why_not`)."""
    try:
        sc = scenario_from_dict(row_scenario(row, engine_ref), source=row["id"], base_dir=Path.cwd())
        model = build_model(resolve(sc, catalog))
    except PdplanError:
        return math.nan, math.nan
    c = row["concurrency"]
    n = min(c, row.get("client_connections") or c)
    b = silicon_rows.aic_benchmark(model, c, n)
    return client_ttft_s(c, n, row["osl"], b.mean_ttft_s, b.mean_tpot_s) * 1e3, b.mean_tpot_s * 1e3


def why_not(row: dict[str, Any], catalog: Catalog) -> str:
    """Why pdplan cannot evaluate a row with its own profile ('' when it can)."""
    try:
        sc = scenario_from_dict(row_scenario(row), source=row["id"], base_dir=Path.cwd())
        build_model(resolve(sc, catalog))
    except PdplanError as err:
        return str(err).split(";")[0][:160]
    return ""


_WORKER: dict[str, Catalog] = {}


def _worker_init() -> None:
    _WORKER["catalog"] = open_catalog()


def _price_chunk(args: tuple[list[dict[str, Any]], str | None]) -> list[tuple[float, float]]:
    rows, engine_ref = args
    return [price(r, _WORKER["catalog"], engine_ref) for r in rows]


class PricePool:
    """:func:`price` over many rows in a process pool (contiguous chunks; the answer is the serial one's)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(workers, initializer=_worker_init) if workers > 1 else None
        _worker_init()  # small batches are priced in this process

    def __call__(self, rows: Sequence[dict[str, Any]], engine_ref: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Predicted (TTFT, TPOT) in ms of every row under ``engine_ref`` (None: each row's own profile)."""
        if self.pool is None or len(rows) < 2 * self.workers:
            out = _price_chunk((list(rows), engine_ref))
        else:
            size = -(-len(rows) // (4 * self.workers))
            chunks = [(list(rows[i : i + size]), engine_ref) for i in range(0, len(rows), size)]
            out = [p for part in self.pool.map(_price_chunk, chunks) for p in part]
        arr = np.array(out, dtype=float).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
