#!/usr/bin/env bash
# pdplan export --to vllm: plan 1 of 3 from examples/opt-13b-a100-distserve.yaml
# plan: colocated 4x a100-sxm-80gb TP2 chunked; 8 GPUs; goodput 38.34 req/s
# at that rate: TTFT P90 244.5 ms, TPOT P90 75.65 ms
# model: facebook/opt-13b
# colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
# tokens per step: 2048, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with random colocated routing; vLLM's data-parallel load balancer sends each request to the engine with the lowest 4 x waiting + running (vllm/v1/engine/core_client.py, DPLBAsyncMPClient), a load-aware split over the 4 data-parallel engines
#
# Usage: bash THIS_FILE colocated
#   once, on one node: one vllm serve runs the plan's 4 instances as data-parallel engines, each request sent
#     to the least loaded by vLLM's own load balancer, all on port 8000.
set -euo pipefail
role="${1:?usage: $0 colocated}"
case "$role" in
  colocated)
    # colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
    # all 4 instances on one node of 8 GPUs, as data-parallel engines
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
    exec vllm serve facebook/opt-13b \
      --port 8000 \
      --tensor-parallel-size 2 \
      --data-parallel-size 4 \
      --max-num-seqs 256 \
      --max-num-batched-tokens 2048 \
      --enable-chunked-prefill \
      --gpu-memory-utilization 0.9 \
      --max-model-len 2048 \
      --dtype bfloat16
    ;;
  *) echo "usage: $0 colocated" >&2; exit 2 ;;
esac
