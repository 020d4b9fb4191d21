#!/usr/bin/env bash
# pdplan export --to sglang: plan 1 of 5 from examples/default.yaml
# plan: 10P2D h100-sxm TP2 / h100-sxm TP4 request; 28 GPUs; goodput 54.52 req/s
# at that rate: TTFT P90 1914 ms, TPOT P90 37.74 ms
# model: meta-llama/Llama-3.1-70B-Instruct
# prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan priced request-granularity KV transfer, but sglang transfers KV per chunk (engines.sglang.sources in pdplan/data/export/targets.yaml), so its TTFT may differ from the plan's: re-run `pdplan optimize --granularity chunk` for numbers this engine can meet
# WARNING: the plan was priced with the vllm engine profile, but it is exported for sglang
# WARNING: the plan was priced with least-loaded prefill routing; the SGLang router has no least-loaded policy, so --prefill-policy power_of_two (the less loaded of two random workers) is written, the nearest: its TTFT tail may exceed the plan's; search with `routing: [random]` in the scenario's search block for numbers this router meets
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-loaded prefill routing; the SGLang router runs --prefill-policy power_of_two --decode-policy random
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE router
#   prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
#     instance's GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port on a shared node.
#   router: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|router}"
case "$role" in
  prefill)
    # prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 4 a node in slots 0..3, 3 node(s) of 8 GPUs; on node n, instance n*4+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 3 ] || { echo "SLOT must be 0..3 (4 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30000 + SLOT))" \
      --base-gpu-id "$((SLOT * 2))" \
      --disaggregation-mode prefill \
      --disaggregation-transfer-backend nixl \
      --disaggregation-bootstrap-port "$((8998 + SLOT))" \
      --tp-size 2 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.869 \
      --context-length 35089 \
      --dtype bfloat16
    ;;
  decode)
    # decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 2 a node in slots 0..1, 1 node(s) of 8 GPUs; on node n, instance n*2+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 1 ] || { echo "SLOT must be 0..1 (2 instance(s) a node)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((30001 + SLOT))" \
      --base-gpu-id "$((SLOT * 4))" \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend nixl \
      --tp-size 4 \
      --max-running-requests 256 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.856 \
      --context-length 131072 \
      --dtype bfloat16
    ;;
  router)
    # routes each request to a prefill and a decode instance
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 3 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 3 ] || { echo "PREFILL_HOSTS needs 3 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 1 node addresses}"
    [ "${#decode_hosts[@]}" -eq 1 ] || { echo "DECODE_HOSTS needs 1 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 10; i++)); do h=${prefill_hosts[i / 4]}; k=$((i % 4)); urls+=(--prefill "http://$h:$((30000 + k))" $((8998 + k))); done
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i / 2]}; k=$((i % 2)); urls+=(--decode "http://$h:$((30001 + k))"); done
    exec python -m sglang_router.launch_router \
      --pd-disaggregation \
      "${urls[@]}" \
      --prefill-policy power_of_two \
      --decode-policy random \
      --host 0.0.0.0 \
      --port 8000
    ;;
  *) echo "usage: $0 prefill|decode|router" >&2; exit 2 ;;
esac
