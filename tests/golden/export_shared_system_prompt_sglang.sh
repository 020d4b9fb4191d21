#!/usr/bin/env bash
# pdplan export --to sglang: plan 1 of 5 from examples/shared-system-prompt.yaml
# plan: colocated 1x h100-sxm TP1 chunked cache affinity; 1 GPUs; goodput 37.3 req/s
# at that rate: TTFT P90 443 ms, TPOT P90 32.5 ms
# model: meta-llama/Llama-3.1-8B-Instruct
# colocated: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# tokens per step: 8192, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm engine profile, but it is exported for sglang
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with random colocated routing and prefix affinity on the colocated pool (cache.routing affinity); the SGLang router runs --policy cache_aware
#
# Usage: bash THIS_FILE colocated SLOT, or bash THIS_FILE router
#   colocated: once per instance, on its node, with HOST_IP set (SLOT picks its GPUs and --port).
#   router: once, the load balancer, with COLOCATED_HOSTS (the node addresses, space-separated, in node order).
set -euo pipefail
role="${1:?usage: $0 colocated|router}"
case "$role" in
  colocated)
    # colocated: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE colocated SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-8B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30000 + SLOT))" \
      --base-gpu-id "$((SLOT * 1))" \
      --tp-size 1 \
      --max-running-requests 256 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.875 \
      --context-length 131072 \
      --dtype bfloat16
    ;;
  router)
    # balances requests over the instances
    read -r -a colocated_hosts <<< "${COLOCATED_HOSTS:?set COLOCATED_HOSTS to the 1 node addresses}"
    [ "${#colocated_hosts[@]}" -eq 1 ] || { echo "COLOCATED_HOSTS needs 1 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 1; i++)); do h=${colocated_hosts[i / 1]}; k=$((i % 1)); urls+=("http://$h:$((30000 + k))"); done
    exec python -m sglang_router.launch_router \
      --worker-urls "${urls[@]}" \
      --policy cache_aware \
      --host 0.0.0.0 \
      --port 8000
    ;;
  *) echo "usage: $0 colocated|router" >&2; exit 2 ;;
esac
