#!/usr/bin/env bash
# pdplan export --to vllm: plan 1 of 5 from examples/opt-13b-a100-distserve.yaml
# plan: colocated 1x a100-sxm-80gb TP2 chunked; 2 GPUs; goodput 9.585 req/s
# at that rate: TTFT P90 244.5 ms, TPOT P90 75.65 ms
# model: facebook/opt-13b
# colocated: 1 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
# tokens per step: 2048, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with random colocated routing; one instance: no load balancer needed
#
# Usage: bash THIS_FILE colocated SLOT
#   once per instance, on its node (SLOT picks its GPUs and --port); vLLM ships no load balancer for separate
#     servers (its toy proxy is for prefill/decode pairs; its data-parallel front is written only where its
#     ranks are the priced instances, dense and TP-only, the same number on each node): put two or more behind
#     one (round-robin).
set -euo pipefail
role="${1:?usage: $0 colocated}"
case "$role" in
  colocated)
    # colocated: 1 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE colocated SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 2)) $((SLOT * 2 + 1)))" \
    exec vllm serve facebook/opt-13b \
      --port "$((8000 + SLOT))" \
      --tensor-parallel-size 2 \
      --max-num-seqs 256 \
      --max-num-batched-tokens 2048 \
      --enable-chunked-prefill \
      --gpu-memory-utilization 0.9 \
      --max-model-len 2048 \
      --dtype bfloat16
    ;;
  *) echo "usage: $0 colocated" >&2; exit 2 ;;
esac
