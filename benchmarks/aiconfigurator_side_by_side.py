"""pdplan's default `optimize` against NVIDIA AIConfigurator's `cli default`, side by side in one run (issue #27:
"the same case ≥ 20× faster than AIConfigurator's `cli default` in one side-by-side run").

The case is pdplan's bundled default (``pdplan optimize``: Llama-3.1-70B, H100 SXM, 32 GPUs, vLLM, TTFT 2 s and TPOT
100 ms at P90) and the nearest question AIConfigurator's CLI can ask:

    aiconfigurator cli default --model-path meta-llama/Meta-Llama-3.1-70B --system h100_sxm --backend vllm
        --total-gpus 32 --isl 1020 --osl 129 --ttft 2000 --tpot 100

AIConfigurator takes fixed lengths, so it gets the chat workload's medians (1,020 / 129 tokens, Splitwise's
conversation trace: ``pdplan/data/workloads/chat.yaml``), where pdplan prices the whole length distributions; its
model id is the one whose ``config.json`` it ships (``aiconfigurator_core/model_configs``), so it runs offline. Each
tool searches its own space (pdplan: disaggregated xPyD at TP 1–8 and the colocated baseline; AIConfigurator: its
``agg`` and ``disagg`` sweeps), so the ratio compares what a capacity engineer waits for, not equal work.

Both run as a user runs them: a fresh process each time, start-up included, alternating the two so that load on a
shared machine hits them alike. Reported: the median over ``--repeats`` runs of wall-clock seconds and of the child's
CPU seconds (user + system), and AIConfigurator's over pdplan's.

AIConfigurator is not a dependency of pdplan: install it in a separate environment (``python -m venv /tmp/aic &&
/tmp/aic/bin/pip install aiconfigurator==0.12.0``) and pass its executable with ``--aiconfigurator``.

Run: ``python benchmarks/aiconfigurator_side_by_side.py --aiconfigurator /tmp/aic/bin/aiconfigurator [--repeats N]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

from timing import child_seconds

ROOT = Path(__file__).resolve().parents[1]
PDPLAN_ARGS = ("optimize",)
AIC_ARGS = (
    "cli",
    "default",
    "--model-path",
    "meta-llama/Meta-Llama-3.1-70B",
    "--system",
    "h100_sxm",
    "--backend",
    "vllm",
    "--total-gpus",
    "32",
    "--isl",
    "1020",
    "--osl",
    "129",
    "--ttft",
    "2000",
    "--tpot",
    "100",
    "--log-level",
    "ERROR",
)


def run_once(argv: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one process ``argv``, run in the checkout's root (its output discarded)."""
    return child_seconds(argv, ROOT)


def _aiconfigurator(path: str) -> str:
    found = shutil.which(path)
    if found is None:
        sys.exit(f"--aiconfigurator: {path!r} is not an executable; install aiconfigurator (module docstring)")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiconfigurator", default="aiconfigurator", help="AIConfigurator's executable")
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    commands = {
        "pdplan optimize": [sys.executable, "-m", "pdplan", *PDPLAN_ARGS],
        "aiconfigurator cli default": [_aiconfigurator(opts.aiconfigurator), *AIC_ARGS],
    }
    for argv in commands.values():  # warm the file cache
        run_once(argv)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(opts.repeats):
        for name, argv in commands.items():
            times[name].append(run_once(argv))
    print(f"| command | wall s (median of {opts.repeats}) | CPU s | wall / pdplan's | CPU / pdplan's |")
    print("|---|---|---|---|---|")
    base_wall = statistics.median(w for w, _ in times["pdplan optimize"])
    base_cpu = statistics.median(c for _, c in times["pdplan optimize"])
    for name, runs in times.items():
        wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} | {wall / base_wall:.1f}× | {cpu / base_cpu:.1f}× |")


if __name__ == "__main__":
    main()
