#!/usr/bin/env bash
# pdplan export --to sglang: plan 1 of 2 from examples/prfaas-h200-h100.yaml
# plan: 1P3D h100-sxm TP4 / h100-sxm TP4 layer + PrfaaS 2x h200-sxm TP4; 24 GPUs; goodput 8.713 req/s
# model: Qwen/Qwen3-Next-80B-A3B-Instruct
# prefill: 1 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 3 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# remote-prefill: 2 x TP4 (4 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# PrfaaS: prompts of more than 28992 tokens are prefilled on the remote-prefill cluster, their KV sent to the local decode instances over dci-100g
# WARNING: the plan priced layer-granularity KV transfer, but sglang transfers KV per chunk (engines.sglang.sources in pdplan/data/export/targets.yaml), so its TTFT may differ from the plan's: re-run `pdplan optimize --granularity chunk` for numbers this engine can meet
# WARNING: the plan was priced with the vllm engine profile, but it is exported for sglang
# WARNING: the plan was priced with least-loaded prefill routing; the SGLang router has no least-loaded policy, so --prefill-policy power_of_two (the less loaded of two random workers) is written, the nearest: its TTFT tail may exceed the plan's; search with `routing: [random]` in the scenario's search block for numbers this router meets
# WARNING: no sglang router routes by prompt length: configure your gateway by hand to send prompts of more than 28992 tokens to the remote-router (port 8001, the remote prefill cluster) and the rest to the router (port 8000)
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-loaded prefill routing; the SGLang router runs --prefill-policy power_of_two --decode-policy random
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE router
#   prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
#     instance's GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port on a shared node.
#   router: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order).
#   remote-prefill: once per instance of the remote prefill cluster, on its node, as prefill.
#   remote-router: once, as router, with REMOTE_PREFILL_HOSTS (the remote cluster's node addresses) and DECODE_HOSTS:
#     it sends its requests to the remote prefill instances, then to the local decode instances.
set -euo pipefail
role="${1:?usage: $0 prefill|decode|remote-prefill|router|remote-router}"
case "$role" in
  prefill)
    # prefill: 1 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path Qwen/Qwen3-Next-80B-A3B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30000 + SLOT))" \
      --base-gpu-id "$((SLOT * 4))" \
      --disaggregation-mode prefill \
      --disaggregation-transfer-backend nixl \
      --disaggregation-bootstrap-port "$((8998 + SLOT))" \
      --tp-size 4 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.856 \
      --context-length 262144 \
      --dtype bfloat16
    ;;
  decode)
    # decode: 3 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 2 a node in slots 0..1, 2 node(s) of 8 GPUs; on node n, instance n*2+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 1 ] || { echo "SLOT must be 0..1 (2 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path Qwen/Qwen3-Next-80B-A3B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30001 + SLOT))" \
      --base-gpu-id "$((SLOT * 4))" \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend nixl \
      --tp-size 4 \
      --max-running-requests 1024 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.856 \
      --context-length 262144 \
      --dtype bfloat16
    ;;
  remote-prefill)
    # remote-prefill: 2 x TP4 (4 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # 2 a node in slots 0..1, 1 node(s) of 8 GPUs; on node n, instance n*2+SLOT: bash THIS_FILE remote-prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 1 ] || { echo "SLOT must be 0..1 (2 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path Qwen/Qwen3-Next-80B-A3B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30000 + SLOT))" \
      --base-gpu-id "$((SLOT * 4))" \
      --disaggregation-mode prefill \
      --disaggregation-transfer-backend nixl \
      --disaggregation-bootstrap-port "$((8998 + SLOT))" \
      --tp-size 4 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.893 \
      --context-length 262144 \
      --dtype bfloat16
    ;;
  router)
    # routes each request to a prefill and a decode instance
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 1 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 1 ] || { echo "PREFILL_HOSTS needs 1 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 node addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 1; i++)); do h=${prefill_hosts[i / 1]}; k=$((i % 1)); urls+=(--prefill "http://$h:$((30000 + k))" $((8998 + k))); done
    for ((i = 0; i < 3; i++)); do h=${decode_hosts[i / 2]}; k=$((i % 2)); urls+=(--decode "http://$h:$((30001 + k))"); done
    exec python -m sglang_router.launch_router \
      --pd-disaggregation \
      "${urls[@]}" \
      --prefill-policy power_of_two \
      --decode-policy random \
      --host 0.0.0.0 \
      --port 8000
    ;;
  remote-router)
    # the PrfaaS front: each request it gets is prefilled on the remote cluster, then decoded locally
    read -r -a remote_prefill_hosts <<< "${REMOTE_PREFILL_HOSTS:?set REMOTE_PREFILL_HOSTS to the 1 node addresses}"
    [ "${#remote_prefill_hosts[@]}" -eq 1 ] || { echo "REMOTE_PREFILL_HOSTS needs 1 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 node addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 2; i++)); do h=${remote_prefill_hosts[i / 2]}; k=$((i % 2)); urls+=(--prefill "http://$h:$((30000 + k))" $((8998 + k))); done
    for ((i = 0; i < 3; i++)); do h=${decode_hosts[i / 2]}; k=$((i % 2)); urls+=(--decode "http://$h:$((30001 + k))"); done
    exec python -m sglang_router.launch_router \
      --pd-disaggregation \
      "${urls[@]}" \
      --prefill-policy power_of_two \
      --decode-policy random \
      --host 0.0.0.0 \
      --port 8001
    ;;
  *) echo "usage: $0 prefill|decode|remote-prefill|router|remote-router" >&2; exit 2 ;;
esac
