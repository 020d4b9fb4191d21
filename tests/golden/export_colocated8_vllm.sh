#!/usr/bin/env bash
# pdplan export --to vllm: plan 1 of 3 from examples/opt-13b-a100-distserve.yaml
# plan: colocated 8x a100-sxm-80gb TP2 chunked; 16 GPUs; goodput 76.68 req/s
# at that rate: TTFT P90 244.5 ms, TPOT P90 75.65 ms
# model: facebook/opt-13b
# colocated: 8 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
# tokens per step: 2048, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with random colocated routing; vLLM's data-parallel load balancer sends each request to the engine with the lowest 4 x waiting + running (vllm/v1/engine/core_client.py, DPLBAsyncMPClient), a load-aware split over the 8 data-parallel engines
#
# Usage: bash THIS_FILE colocated NODE
#   once on each of 2 nodes (NODE 0..1), with HEAD_IP set to the address of node 0: together they run the
#     plan's 8 instances as data-parallel engines, 4 a node; node 0 serves the API on port 8000 and sends
#     each request to the least loaded engine on any node (vLLM's own load balancer), the others run --headless.
set -euo pipefail
role="${1:?usage: $0 colocated}"
case "$role" in
  colocated)
    # colocated: 8 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
    # all 8 instances as data-parallel engines on 2 nodes of 8 GPUs (4 a node): bash THIS_FILE colocated NODE (0..1) on each, HEAD_IP the address of node 0
    NODE="${2:-0}"
    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le 1 ] || { echo "NODE must be 0..1 (the engines span 2 nodes)" >&2; exit 2; }
    if [ "$NODE" -eq 0 ]; then
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      exec vllm serve facebook/opt-13b \
        --port 8000 \
        --tensor-parallel-size 2 \
        --data-parallel-size 8 \
        --data-parallel-size-local 4 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0, which serves the API}" \
        --data-parallel-rpc-port 29550 \
        --max-num-seqs 256 \
        --max-num-batched-tokens 2048 \
        --enable-chunked-prefill \
        --gpu-memory-utilization 0.9 \
        --max-model-len 2048 \
        --dtype bfloat16
    else
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      exec vllm serve facebook/opt-13b \
        --headless \
        --tensor-parallel-size 2 \
        --data-parallel-size 8 \
        --data-parallel-size-local 4 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0, which serves the API}" \
        --data-parallel-rpc-port 29550 \
        --data-parallel-start-rank "$((NODE * 4))" \
        --max-num-seqs 256 \
        --max-num-batched-tokens 2048 \
        --enable-chunked-prefill \
        --gpu-memory-utilization 0.9 \
        --max-model-len 2048 \
        --dtype bfloat16
    fi
    ;;
  *) echo "usage: $0 colocated" >&2; exit 2 ;;
esac
