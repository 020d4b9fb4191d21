#!/usr/bin/env bash
# pdplan export --to sglang: plan 1 of 3 from examples/opt-13b-a100-distserve.yaml
# plan: colocated 4x a100-sxm-80gb TP2 chunked; 8 GPUs; goodput 38.34 req/s
# at that rate: TTFT P90 244.5 ms, TPOT P90 75.65 ms
# model: facebook/opt-13b
# colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
# tokens per step: 2048, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm engine profile, but it is exported for sglang
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with random colocated routing; the SGLang router runs --policy random
#
# Usage: bash THIS_FILE colocated SLOT, or bash THIS_FILE router
#   colocated: once per instance, on its node, with HOST_IP set (SLOT picks its GPUs and --port).
#   router: once, the load balancer, with COLOCATED_HOSTS (the node addresses, space-separated, in node order).
set -euo pipefail
role="${1:?usage: $0 colocated|router}"
case "$role" in
  colocated)
    # colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
    # 4 a node in slots 0..3, 1 node(s) of 8 GPUs; on node n, instance n*4+SLOT: bash THIS_FILE colocated SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 3 ] || { echo "SLOT must be 0..3 (4 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path facebook/opt-13b \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30000 + SLOT))" \
      --base-gpu-id "$((SLOT * 2))" \
      --tp-size 2 \
      --max-running-requests 256 \
      --chunked-prefill-size 2048 \
      --mem-fraction-static 0.869 \
      --context-length 2048 \
      --dtype bfloat16
    ;;
  router)
    # balances requests over the instances
    read -r -a colocated_hosts <<< "${COLOCATED_HOSTS:?set COLOCATED_HOSTS to the 1 node addresses}"
    [ "${#colocated_hosts[@]}" -eq 1 ] || { echo "COLOCATED_HOSTS needs 1 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 4; i++)); do h=${colocated_hosts[i / 4]}; k=$((i % 4)); urls+=("http://$h:$((30000 + k))"); done
    exec python -m sglang_router.launch_router \
      --worker-urls "${urls[@]}" \
      --policy random \
      --host 0.0.0.0 \
      --port 8000
    ;;
  *) echo "usage: $0 colocated|router" >&2; exit 2 ;;
esac
