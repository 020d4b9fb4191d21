#!/usr/bin/env bash
# pdplan export --to vllm: plan 1 of 5 from examples/default.yaml
# plan: 10P2D h100-sxm TP2 / h100-sxm TP4 request; 28 GPUs; goodput 54.52 req/s
# at that rate: TTFT P90 1914 ms, TPOT P90 37.74 ms
# model: meta-llama/Llama-3.1-70B-Instruct
# prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# WARNING: the plan was priced with least-loaded prefill routing, but vLLM's toy proxy round-robins requests over the prefillers (it has no policy option), so its TTFT may differ from the plan's: search with `routing: [round-robin]` in the scenario's search block for numbers this router meets
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-loaded prefill routing; vLLM's toy proxy round-robins over prefillers and decoders
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE proxy
#   prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
#     instance's GPUs (CUDA_VISIBLE_DEVICES), --port and VLLM_NIXL_SIDE_CHANNEL_PORT on a shared node.
#   proxy: once, from a vLLM source checkout, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses,
#     space-separated, in node order).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|proxy}"
case "$role" in
  prefill)
    # prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 4 a node in slots 0..3, 3 node(s) of 8 GPUs; on node n, instance n*4+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 3 ] || { echo "SLOT must be 0..3 (4 instance(s) a node)" >&2; exit 2; }
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 2)) $((SLOT * 2 + 1)))" \
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT="$((5600 + SLOT))" \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-70B-Instruct \
      --port "$((8100 + SLOT))" \
      --tensor-parallel-size 2 \
      --max-num-batched-tokens 8192 \
      --gpu-memory-utilization 0.9 \
      --max-model-len 35089 \
      --dtype bfloat16 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
    ;;
  decode)
    # decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 2 a node in slots 0..1, 1 node(s) of 8 GPUs; on node n, instance n*2+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 1 ] || { echo "SLOT must be 0..1 (2 instance(s) a node)" >&2; exit 2; }
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 4)) $((SLOT * 4 + 3)))" \
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT="$((5600 + SLOT))" \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-70B-Instruct \
      --port "$((8200 + SLOT))" \
      --tensor-parallel-size 4 \
      --max-num-seqs 256 \
      --max-num-batched-tokens 8192 \
      --gpu-memory-utilization 0.9 \
      --max-model-len 131072 \
      --dtype bfloat16 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
    ;;
  proxy)
    # routes each request to a prefiller, then to a decoder
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 3 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 3 ] || { echo "PREFILL_HOSTS needs 3 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 1 node addresses}"
    [ "${#decode_hosts[@]}" -eq 1 ] || { echo "DECODE_HOSTS needs 1 addresses" >&2; exit 2; }
    p_hosts=(); p_ports=(); d_hosts=(); d_ports=()
    for ((i = 0; i < 10; i++)); do h=${prefill_hosts[i / 4]}; k=$((i % 4)); p_hosts+=("$h"); p_ports+=($((8100 + k))); done
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i / 2]}; k=$((i % 2)); d_hosts+=("$h"); d_ports+=($((8200 + k))); done
    exec python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py \
      --host 0.0.0.0 \
      --port 8192 \
      --prefiller-hosts "${p_hosts[@]}" \
      --prefiller-ports "${p_ports[@]}" \
      --decoder-hosts "${d_hosts[@]}" \
      --decoder-ports "${d_ports[@]}"
    ;;
  *) echo "usage: $0 prefill|decode|proxy" >&2; exit 2 ;;
esac
