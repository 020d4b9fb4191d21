#!/usr/bin/env bash
# pdplan export --to sglang: plan 2 of 5 from examples/deepseek-v3-wide-ep.yaml (wide-ep-request-2node)
# plan: 2P2D h200-sxm TP1 DP16 EP16 / h200-sxm TP1 DP16 EP16 request; 64 GPUs; goodput 126.7 req/s
# at that rate: TTFT P90 1337 ms, TPOT P90 121.1 ms
# model: deepseek-ai/DeepSeek-V3
# prefill: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# decode: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# WARNING: the plan priced request-granularity KV transfer, but sglang transfers KV per chunk (engines.sglang.sources in pdplan/data/export/targets.yaml), so its TTFT may differ from the plan's: re-run `pdplan optimize --granularity chunk` for numbers this engine can meet
# WARNING: the plan was priced with the sglang 0.5.1.post1 engine profile, but this file targets SGLang 0.5.11 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are SGLang 0.5.1.post1's (host time per step, scheduler defaults); before relying on them, fit a profile to SGLang 0.5.11 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# WARNING: the plan was priced with least-loaded prefill routing; the SGLang router has no least-loaded policy, so --prefill-policy power_of_two (the less loaded of two random workers) is written, the nearest: its TTFT tail may exceed the plan's; search with `routing: [random]` in the scenario's search block for numbers this router meets
# engine: targets SGLang 0.5.11 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the sglang 0.5.1.post1 engine profile
# routing: priced with least-loaded prefill routing; the SGLang router runs --prefill-policy power_of_two --decode-policy random
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE router
#   prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
#     instance's GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port on a shared node.
#   router: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order).
#   a role whose instance spans nodes (its comment says so) takes NODE (0..nodes-1) in place of SLOT, on
#     each of the instance's nodes, with HEAD_IP set to the address of its node 0 (which serves its port).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|router}"
case "$role" in
  prefill)
    # prefill: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs (8 data-parallel ranks a node), 4 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE prefill NODE (0..1) on each, HEAD_IP the address of its node 0
    NODE="${2:-0}"
    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le 1 ] || { echo "NODE must be 0..1 (the instance spans 2 nodes)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path deepseek-ai/DeepSeek-V3 \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port 30000 \
      --dist-init-addr "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}:5000" \
      --nnodes 2 \
      --node-rank "$NODE" \
      --disaggregation-mode prefill \
      --disaggregation-transfer-backend mooncake \
      --disaggregation-bootstrap-port 8998 \
      --tp-size 16 \
      --dp-size 16 \
      --enable-dp-attention \
      --ep-size 16 \
      --chunked-prefill-size 131072 \
      --mem-fraction-static 0.874 \
      --context-length 163840 \
      --quantization fp8 \
      --kv-cache-dtype fp8_e4m3 \
      --moe-a2a-backend deepep \
      --deepep-mode normal \
      --enable-two-batch-overlap \
      --enable-eplb \
      --ep-num-redundant-experts 32
    ;;
  decode)
    # decode: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs (8 data-parallel ranks a node), 4 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE decode NODE (0..1) on each, HEAD_IP the address of its node 0
    NODE="${2:-0}"
    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le 1 ] || { echo "NODE must be 0..1 (the instance spans 2 nodes)" >&2; exit 2; }
    exec python -m sglang.launch_server \
      --model-path deepseek-ai/DeepSeek-V3 \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port 30001 \
      --dist-init-addr "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}:5000" \
      --nnodes 2 \
      --node-rank "$NODE" \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend mooncake \
      --tp-size 16 \
      --dp-size 16 \
      --enable-dp-attention \
      --ep-size 16 \
      --max-running-requests 4096 \
      --chunked-prefill-size 131072 \
      --mem-fraction-static 0.874 \
      --context-length 163840 \
      --quantization fp8 \
      --kv-cache-dtype fp8_e4m3 \
      --moe-a2a-backend deepep \
      --deepep-mode low_latency \
      --enable-two-batch-overlap \
      --enable-eplb \
      --ep-num-redundant-experts 32
    ;;
  router)
    # routes each request to a prefill and a decode instance
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 4 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 4 ] || { echo "PREFILL_HOSTS needs 4 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 4 node addresses}"
    [ "${#decode_hosts[@]}" -eq 4 ] || { echo "DECODE_HOSTS needs 4 addresses" >&2; exit 2; }
    urls=()
    for ((i = 0; i < 2; i++)); do h=${prefill_hosts[i * 2]}; k=0; urls+=(--prefill "http://$h:$((30000 + k))" $((8998 + k))); done
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i * 2]}; k=0; urls+=(--decode "http://$h:$((30001 + k))"); done
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
