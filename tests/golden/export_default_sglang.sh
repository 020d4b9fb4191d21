#!/usr/bin/env bash
# pdplan export --to sglang: plan 1 of 5 from examples/default.yaml
# plan: 8P2D h100-sxm TP2 / h100-sxm TP4 request; 24 GPUs; goodput 43.35 req/s
# at that rate: TTFT P90 1765 ms, TPOT P90 49.45 ms
# model: meta-llama/Llama-3.1-70B-Instruct
# prefill: 8 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan priced request-granularity KV transfer, but sglang transfers KV per chunk (engines.sglang.sources in pdplan/data/export/targets.yaml), so its TTFT may differ from the plan's: re-run `pdplan optimize --granularity chunk` for numbers this engine can meet
# WARNING: the plan was priced with the vllm engine profile, but it is exported for sglang
# WARNING: the plan was priced with least-work prefill routing; the SGLang router has no least-work policy, so --prefill-policy power_of_two (the less loaded of two random workers) is written, the nearest: its TTFT tail may exceed the plan's; search with `routing: [random]` in the scenario's search block for numbers this router meets
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-work prefill routing; the SGLang router runs --prefill-policy power_of_two --decode-policy random
#
# Usage: bash THIS_FILE prefill|decode|router
#   prefill, decode: once per instance, on its host, with HOST_IP set to that host's address. Instances that share
#     a node need their own GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port.
#   router: once, with PREFILL_HOSTS and DECODE_HOSTS (space-separated addresses).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|router}"
case "$role" in
  prefill)
    # prefill: 8 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB); run once per instance, on its host
    exec python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port 30000 \
      --disaggregation-mode prefill \
      --disaggregation-transfer-backend nixl \
      --disaggregation-bootstrap-port 8998 \
      --tp-size 2 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.8344 \
      --context-length 35089 \
      --dtype bfloat16
    ;;
  decode)
    # decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB); run once per instance, on its host
    exec python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port 30001 \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend nixl \
      --tp-size 4 \
      --max-running-requests 256 \
      --chunked-prefill-size 8192 \
      --mem-fraction-static 0.8313 \
      --context-length 131072 \
      --dtype bfloat16
    ;;
  router)
    # routes each request to a prefill and a decode instance
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 8 instance addresses}"
    [ "${#prefill_hosts[@]}" -eq 8 ] || { echo "PREFILL_HOSTS needs 8 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 instance addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    urls=()
    for h in "${prefill_hosts[@]}"; do urls+=(--prefill "http://$h:30000" 8998); done
    for h in "${decode_hosts[@]}"; do urls+=(--decode "http://$h:30001"); done
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
