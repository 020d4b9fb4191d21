"""Writes the synthetic ``vllm bench serve`` result files of the README's calibration example
(examples/benchmarks/vllm-h100/*.json).

Usage: python benchmarks/make_calibration_example.py [--out examples/benchmarks/vllm-h100]

They are NOT measurements: each file is pdplan's own prediction (``evaluate`` at the run's concurrency, closed loop)
under the packaged vLLM profile with its overhead terms replaced by :data:`TRUTH`, times a ±2 % seeded noise, written
with the keys ``vllm bench serve --save-result`` uses (``vllm/benchmarks/serve.py``; only those pdplan can compute:
lengths, counts, mean TTFT/TPOT/E2EL, throughput). ``tp`` is recorded as ``--metadata tp=N`` would; the GPU is not
(the example passes ``--gpu``). Calibrating on them should give back :data:`TRUTH` within the reported uncertainty.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pdplan.calibrate.benchmarks import predict_runs, profile_yaml, with_terms
from pdplan.io.catalog import open_catalog
from pdplan.specs.benchmark import BenchmarkRun

REPO = Path(__file__).resolve().parents[1]
TRUTH = {
    "step_s": 1.0e-3,
    "step_s_per_seq": 0.0,
    "collective_s": 2.0e-5,
    "launch_gap_s_per_layer": 8.0e-6,
    "request_s": 0.03,
    "startup_cohorts": 2.79,  # the packaged vLLM profile's value when these runs were made (it is 1 since issue #23)
}
HF_ID = {"llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct", "qwen3-32b": "Qwen/Qwen3-32B"}
# (model, tp, concurrency); ISL 1024, OSL 256 throughout, 10 prompts per client
SWEEP = [
    ("llama-3.1-8b", 1, 1),
    ("llama-3.1-8b", 1, 8),
    ("llama-3.1-8b", 1, 32),
    ("llama-3.1-8b", 2, 8),
    ("llama-3.1-8b", 2, 32),
    ("qwen3-32b", 2, 4),
    ("qwen3-32b", 2, 16),
    ("qwen3-32b", 4, 16),
    ("qwen3-32b", 4, 64),
]
ISL, OSL = 1024, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "benchmarks" / "vllm-h100")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    catalog = open_catalog()
    truth = args.out / "truth.yaml.tmp"
    truth.write_text(profile_yaml(with_terms(catalog.engine("vllm"), TRUTH)))
    runs = [
        BenchmarkRun(
            engine="vllm",
            gpu="h100-sxm",
            model=m,
            tp=t,
            isl=ISL,
            osl=OSL,
            concurrency=c,
            ttft_s=1,
            tpot_s=1,
            source="-",
            num_requests=10 * c,
        )
        for m, t, c in SWEEP
    ]
    try:
        ttft, tpot = predict_runs(runs, str(truth), catalog)
    finally:
        truth.unlink()
    noise = np.random.default_rng(2026).normal(1.0, 0.02, size=(2, len(runs)))
    for (model, tp, c), a, b, na, nb in zip(SWEEP, ttft, tpot, *noise, strict=True):
        ttft_ms, tpot_ms = float(a * na) * 1e3, float(b * nb) * 1e3
        e2el_ms = ttft_ms + (OSL - 1) * tpot_ms
        n = 10 * c
        record = {
            "date": "20261201-120000",
            "endpoint_type": "vllm",
            "backend": "vllm",
            "label": None,
            "model_id": HF_ID[model],
            "tokenizer_id": HF_ID[model],
            "num_prompts": n,
            "tp": str(tp),
            "request_rate": "inf",
            "burstiness": 1.0,
            "max_concurrency": c,
            "duration": n * e2el_ms / 1e3 / c,
            "completed": n,
            "failed": 0,
            "total_input_tokens": n * ISL,
            "total_output_tokens": n * OSL,
            "request_throughput": c / (e2el_ms / 1e3),
            "output_throughput": c * OSL / (e2el_ms / 1e3),
            "mean_ttft_ms": ttft_ms,
            "mean_tpot_ms": tpot_ms,
            "mean_e2el_ms": e2el_ms,
        }
        path = args.out / f"vllm-{model}-tp{tp}-c{c}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(path)


if __name__ == "__main__":
    main()
