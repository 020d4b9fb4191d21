"""Held-out check of colocated attention DP (:mod:`pdplan.serving.colocated_dp`) on the measured TensorRT-LLM
DeepSeek-R1 runs with attention DP, for docs/colocated_dp.md.

Rows: ``aiconfigurator-silicon/h200_sxm.csv`` (found by ``benchmarks/data_root.py``; the vendored slice holds it
whole), ``mode`` agg, ``backend`` trtllm, ``attention_dp_size`` > 1 and ``tp_size · attention_dp_size ==
moe_ep_size`` (8 TP1 ranks, EP 8 on one 8-GPU H200 node: the ``2026_03_25_deepseek_r1_*_tp8_0_ep8_0_*`` rows). The
same measurements appear again in the ``2026_04_06`` and ``dsr1_*_cfg*`` dumps with ``attention_dp_size`` 64 and
``moe_tp_size`` 8 (same TTFT and TPOT to the last digit, a column scaling of those dumps like the MiniMax-M2.5 rows
of ``benchmarks/moe_rows.py``); they are listed as duplicates and not priced twice.

Pricing is the project's for a measured row (``benchmarks/moe_rows.py`` ``scenario_dict`` and
:func:`pdplan.calibrate.silicon_rows.aic_benchmark`, the way ``benchmarks/cross_gpu_rows.py`` prices a colocated MoE
row), with the row's GPU (h200-sxm) and its attention DP, which ``scenario_dict`` leaves out of a colocated row. Nothing
is fitted to these rows: it is a held-out check of the model as it stands.

Run: ``python benchmarks/colocated_dp_rows.py`` (about 10 s); ``--rank-seats`` caps each rank at the row's
``batch_size`` (C/D, the per-rank batch AIConfigurator's benchmark rule writes as ``max_batch_size``) instead of the
engine profile's seats, as ``moe_rows.decode_seats`` does for the disaggregated TensorRT-LLM rows.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

from data_root import calibration_path
from moe_rows import moe_rows, scenario_dict

from pdplan.calibrate import silicon_rows
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve

CSV = "aiconfigurator-silicon/h200_sxm.csv"


def dp_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows to price, ids of the duplicate rows): module docstring."""
    with path.open(newline="") as fh:
        raw = {r["id"]: r for r in csv.DictReader(fh)}
    rows, _ = moe_rows(path)
    keep, dupes = [], []
    for row in rows:
        r = raw[row["id"]]
        if row["mode"] != "agg" or row["engine"] != "trtllm" or row["dp"] <= 1:
            continue
        if row["tp"] * row["dp"] != row["ep"]:
            dupes.append(row["id"])
            continue
        keep.append({**row, "seats_per_rank": int(r["batch_size"])})
    return keep, dupes


def price(row: dict[str, Any], rank_seats: bool) -> tuple[float, float, float, float]:
    """(TTFT ms, TPOT ms) of the benchmark loop and (TTFT ms, TPOT ms) of the open model at its closed-loop
    throughput; ``rank_seats``: each rank's ``max_num_seqs`` is the row's ``batch_size`` (C/D), else the profile's."""
    sc = scenario_dict(row)
    sc["colocated"].update(gpu="h200-sxm", dp=row["dp"])
    if rank_seats:
        sc["max_num_seqs"] = row["seats_per_rank"]
    scenario = scenario_from_dict(sc, source=row["id"], base_dir=Path.cwd())
    model = build_model(resolve(scenario, open_catalog()))
    assert isinstance(model, ColocatedModel)
    c = int(row["concurrency"])
    n = min(c, row.get("client_connections") or c)
    bench = silicon_rows.aic_benchmark(model, c, n)
    from pdplan.benchmark.mva import closed_loop_throughput

    loop = closed_loop_throughput(model, c)
    snap = model.snapshot([loop.throughput_rps * (1.0 - 1e-9)])
    return (
        bench.mean_ttft_s * 1e3,
        bench.mean_tpot_s * 1e3,
        float(snap.ttft.mean_s[0]) * 1e3,
        float(snap.tpot_reported.mean_s[0]) * 1e3,
    )


def main() -> int:
    rank_seats = "--rank-seats" in sys.argv[1:]
    rows, dupes = dp_rows(calibration_path(CSV))
    print("| ISL/OSL | C | measured TTFT / TPOT (ms) | benchmark loop TTFT / TPOT (ms) | error | open model at X |")
    print("|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda r: (r["isl"], r["osl"], r["concurrency"])):
        ttft, tpot, o_ttft, o_tpot = price(row, rank_seats)
        e_ttft, e_tpot = ttft / row["ttft_ms"] - 1.0, tpot / row["tpot_ms"] - 1.0
        print(
            f"| {row['isl']}/{row['osl']} | {row['concurrency']} | {row['ttft_ms']:.0f} / {row['tpot_ms']:.1f} "
            f"| {ttft:.0f} / {tpot:.1f} | {e_ttft:+.0%} / {e_tpot:+.0%} | {o_ttft:.0f} / {o_tpot:.1f} |"
        )
    print(f"\nDuplicates not priced: {', '.join(sorted(dupes))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
