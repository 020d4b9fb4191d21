"""The MoE and disaggregated rows of ``aiconfigurator-silicon/h100_sxm.csv`` as pdplan scenarios (for
``benchmarks/engine_accuracy.py --moe``).

Column meanings (AIConfigurator's silicon dump; docs/engines.md §2.2, §2.3):

* the benchmark concurrency C is ``silicon_concurrency=`` in ``silicon_data_source`` where the row has it (the
  ``batch_size`` column is C in some dumps and C/4 in others for the same measurement: MiniMax-M2.5 2026-03-25 vs
  2026-04-06); a disaggregated row without it (the Dynamo 0.8 Qwen3 rows) takes AIC's reported disaggregated
  concurrency ``decode_batch_size × decode_num_workers × decode_attention_dp_size`` [I: AIC's ``d_bs × y`` with the
  per-rank batch of attention-DP workers];
* colocated rows: ``tp_size`` attention TP, ``moe_ep_size`` expert parallelism (0 or empty = 1), attention DP 1;
  the MiniMax-M2.5 rows of the 2026-04-06 dump give ``moe_ep_size`` 16 (and ``batch_size`` C/4) for the TP4 EP4
  runs their ids name (the 2026-03-25 dump has the same measurements at ``moe_ep_size`` 4): where ``moe_ep_size``
  does not divide ``tp_size`` the id's ``_ep<N>_`` is taken. The TensorRT-LLM DeepSeek-R1 rows of the H200 2026-04-06
  dump give ``tp_size`` 64, ``moe_tp_size`` 8, ``moe_ep_size`` 8 for the measurements the 2026-03-25 dump records
  at TP 8, ``moe_tp_size`` 1, EP 8 (same measured date, same TTFT and TPOT to every digit), and the ``db-dump``
  ``dsr1_*_cfg181`` rows use the same form: ``tp_size`` multiplied by ``moe_tp_size``. A TP group larger than one
  node (``gpus_per_node`` of the row's GPU, 8 on HGX H100/H200; AIConfigurator's colocated runs stay in one node)
  with ``moe_tp_size`` > 1 is read as that form, TP = ``tp_size / moe_tp_size`` (:func:`colocated_tp`); before,
  they were priced at TP 64;
* disaggregated rows: ``{prefill,decode}_{tp,attention_dp,moe_ep}_size`` per role and ``*_num_workers`` the instance
  counts. The DeepSeek-R1 rows of the 2026-03-25 / 2026-04-06 dumps leave the worker counts empty; where a row of
  the ``dsr1_*_cfg*`` dump records the same measurement (same ISL/OSL, C and TTFT) its deployment is taken from
  there; SGLang's TP16 rows are one prefill and one decode instance of 16 GPUs each [I: the SGLang PD recipe for
  DeepSeek on H100 runs ``--tp 16 --nnodes 2`` per role, and the rows give no other count]; the other TRT-LLM rows
  have no deployment we can reconstruct and are skipped with that reason.

Engine profile: the engine's shipped one, except where :data:`VERSION_PROFILES` names a profile for the row's version
(vLLM 0.18 rows: ``vllm-0.18``, async scheduling).

KV transfer granularity: the engine's own, ``kv_transfer_granularity`` in ``pdplan/data/export/targets.yaml`` (sourced
there: SGLang 0.5.x sends each finished prefill chunk, ``send_kv_chunk`` in ``disaggregation/prefill.py``; vLLM's NIXL
connector reads a request's blocks after its prefill); TensorRT-LLM has no entry there and keeps the scenario default
(``layer``). Before, every disaggregated row was priced layer-wise, a transfer hidden behind the prefill that SGLang
0.5.8 does not do (layer-pipelined transfer is an open SGLang pull request, #28529, 2026-06).

Decode seats (TensorRT-LLM rows): AIConfigurator's benchmark rule plugin, in force when these runs were generated
(``generator/rule_plugin/benchmark/trtllm.rule`` since ai-dynamo/aiconfigurator 71bb3d00e, 2026-01-30; the runs are of
2026-02-08), writes ``agg_decode max_batch_size = (max_batch_size if max_batch_size else 128)`` with ``max_batch_size``
the SDK's per-worker decode batch (``generator/module_bridge.py``: ``"max_batch_size": bs``), CUDA graphs for 1 to
that batch, and the benchmark concurrency ``decode_workers × decode max_batch_size``; the CSV records that batch as
``decode_batch_size`` and every ``dsr1_*_cfg*`` row has C = ``decode_num_workers × decode_batch_size`` (6 = 3 × 2,
154 = 2 × 77). The scenario takes it as ``max_num_seqs`` (:func:`decode_seats`), so the decode step is fitted over the
batches the worker can run, not over the profile's 256. Only TensorRT-LLM rows: the other engines' rows keep their
profiles' seats (the vLLM and SGLang benchmark rules set the same cap, a change for their groups' owners).

KV dtype: FP8 where the row's precision is FP8 (TensorRT-LLM and SGLang FP8 recipes), else BF16; vLLM rows BF16
(``--kv-cache-dtype auto``: :func:`kv_dtype_of`). gpt-oss-120b keeps
its MXFP4 experts whatever ``dtype`` says (the checkpoint's ``quantization_config``).
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path
from typing import Any

from client_connections import connections_of

from pdplan.io.export_data import export_targets

MOE_MODELS = {
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
}
DENSE_DISAGG = {"Qwen/Qwen3-32B": "qwen3-32b"}


def _int(value: str, default: int = 1) -> int:
    return int(value) if value and int(value) > 0 else default


def _recorded(r: dict[str, str]) -> bool:
    return re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]) is not None


def _concurrency(r: dict[str, str]) -> int | None:
    found = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
    if found:
        return int(found.group(1))
    if r["mode"] == "disagg" and r["decode_batch_size"] and r["decode_num_workers"]:
        return int(r["decode_batch_size"]) * int(r["decode_num_workers"]) * _int(r["decode_attention_dp_size"])
    return int(r["batch_size"]) if r["batch_size"] else None


def _role(r: dict[str, str], side: str) -> dict[str, int]:
    return {
        "tp": _int(r[f"{side}_tp_size"]),
        "dp": _int(r[f"{side}_attention_dp_size"]),
        "ep": _int(r[f"{side}_moe_ep_size"]),
        "count": _int(r[f"{side}_num_workers"], 0),
    }


def _base(r: dict[str, str], name: str) -> dict[str, Any]:
    fp8 = r["precision"] == "fp8" or r["gemm_quant_mode"].startswith("fp8")
    return {
        "id": r["id"],
        "engine": r["backend"],
        "version": r["backend_version"] or "?",
        "model": name,
        "dtype": "fp8" if fp8 else "bf16",
        "isl": int(r["isl"]),
        "osl": int(r["osl"]),
        "ttft_ms": float(r["silicon_ttft_ms"]),
        "tpot_ms": float(r["silicon_tpot_ms"]),
        "mode": r["mode"],
    }


def moe_rows(path: Path) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """(rows to price, rows skipped with the reason): every MoE row and every disaggregated row of the CSV."""
    with path.open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    known = {(r["isl"], r["osl"], _concurrency(r), r["silicon_ttft_ms"]): r for r in raw if r["id"].startswith("dsr1_")}
    out, skipped = [], []
    for r in raw:
        name = MOE_MODELS.get(r["model_path"]) or (DENSE_DISAGG.get(r["model_path"]) if r["mode"] == "disagg" else None)
        if name is None:
            continue
        row = _base(r, name)
        row["concurrency"] = _concurrency(r)
        row["c_inferred"] = not _recorded(r) and r["mode"] == "disagg"
        row["client_connections"] = connections_of(row, r["silicon_data_source"])
        if r["mode"] == "agg":
            tp, ep = colocated_tp(r), _int(r["moe_ep_size"])
            if tp % ep:  # module docstring: the 2026-04-06 MiniMax rows scale ep (and batch) by 4; the id keeps it
                found = re.search(r"_ep(\d+)_", r["id"])
                ep = int(found.group(1)) if found else ep
            row.update(tp=tp, dp=_int(r["attention_dp_size"]), ep=ep)
            out.append(row)
            continue
        source = r
        if not r["decode_num_workers"]:
            source = known.get((r["isl"], r["osl"], row["concurrency"], r["silicon_ttft_ms"]), r)
        prefill, decode = _role(source, "prefill"), _role(source, "decode")
        if source is r and not r["decode_num_workers"]:
            if r["backend"] != "sglang":
                skipped.append((row, "disaggregated row without worker counts (no cfg row records its deployment)"))
                continue
            prefill["count"] = decode["count"] = 1  # module docstring: SGLang's one 16-GPU instance per role
        row.update(prefill=prefill, decode=decode)
        seats = decode_seats(source)
        if seats is not None:
            row["decode_seats"] = seats
        out.append(row)
    return out, skipped


def colocated_tp(r: dict[str, str]) -> int:
    """A colocated row's attention TP: ``tp_size``, or ``tp_size / moe_tp_size`` where ``tp_size`` exceeds one node
    of the row's GPU and ``moe_tp_size`` > 1 (the column-scaled form of the module docstring: ``tp_size`` 64,
    ``moe_tp_size`` 8 → TP 8)."""
    tp, moe_tp = _int(r["tp_size"]), _int(r["moe_tp_size"])
    if moe_tp > 1 and tp % moe_tp == 0 and tp > _node_gpus(r["system"]):
        return tp // moe_tp
    return tp


@functools.cache
def _node_gpus(system: str) -> int:
    """GPUs in one node of a CSV ``system`` (``h200_sxm`` → the catalogue's ``h200-sxm`` ``gpus_per_node``)."""
    from pdplan.io.catalog import open_catalog

    return int(open_catalog().gpu(system.replace("_", "-")).gpus_per_node)


def decode_seats(r: dict[str, str]) -> int | None:
    """A TensorRT-LLM disaggregated row's decode ``max_batch_size`` per worker (per attention-DP rank): the CSV's
    ``decode_batch_size`` (module docstring, AIConfigurator's benchmark rule); None for other engines and rows without
    it."""
    if r["backend"] != "trtllm" or r["mode"] != "disagg" or not r["decode_batch_size"]:
        return None
    return int(r["decode_batch_size"])


def transfer_granularity(engine: str) -> str:
    """The KV-transfer granularity an engine implements (module docstring): ``targets.yaml``'s
    ``kv_transfer_granularity`` for vLLM and SGLang, the scenario default ``layer`` for an engine it does not list."""
    listed = {name: data.kv_transfer_granularity for name, data in export_targets().engines.items()}
    return str(listed.get(engine, "layer"))


VERSION_PROFILES = {("vllm", "0.18"): "vllm-0.18"}
"""Rows of these (engine, version prefix) are priced with the named profile; the rest with the engine's default."""


def profile_of(row: dict[str, Any]) -> str:
    """The engine profile a row is priced with (:data:`VERSION_PROFILES`, else the engine's own name)."""
    for (engine, prefix), profile in VERSION_PROFILES.items():
        if row["engine"] == engine and row["version"].startswith(prefix):
            return profile
    return str(row["engine"])


def kv_dtype_of(row: dict[str, Any]) -> str:
    """The KV-cache dtype a row ran with (module docstring): vLLM's ``--kv-cache-dtype`` defaults to ``auto``, the
    model's activation dtype (BF16) whatever the weights' quantisation, unless the checkpoint ships KV scales
    (vllm/config/cache.py ``CacheConfig.cache_dtype = "auto"``; neither MiniMax-M2.5's block-FP8 nor gpt-oss's MXFP4
    ``quantization_config`` quantises the KV cache); the TensorRT-LLM and SGLang FP8 recipes take FP8 KV."""
    return "bf16" if row["engine"] == "vllm" else str(row["dtype"])


def scenario_dict(row: dict[str, Any]) -> dict[str, Any]:
    """The pdplan scenario of one row (fixed ISL/OSL; the row's engine)."""
    sc: dict[str, Any] = {
        "model": row["model"],
        "workload": {
            "input_tokens": {"dist": "fixed", "value": row["isl"]},
            "output_tokens": {"dist": "fixed", "value": row["osl"]},
        },
        "dtype": row["dtype"],
        "kv_dtype": kv_dtype_of(row),
        "engine": profile_of(row),
    }
    if row["mode"] == "agg":
        sc["mode"] = "colocated"
        sc["colocated"] = {"gpu": "h100-sxm", "tp": row["tp"], "ep": row["ep"], "count": 1, "scheduler": "chunked"}
        return sc
    sc.update(
        mode="disaggregated", link="ib-ndr", granularity=transfer_granularity(row["engine"]), routing="least-work"
    )
    if "decode_seats" in row:
        sc["max_num_seqs"] = row["decode_seats"]
    for side in ("prefill", "decode"):
        role = row[side]
        sc[side] = {"gpu": "h100-sxm", "tp": role["tp"], "dp": role["dp"], "ep": role["ep"], "count": role["count"]}
    return sc
