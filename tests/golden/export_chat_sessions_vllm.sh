#!/usr/bin/env bash
# pdplan export --to vllm: plan 3 of 5 from examples/chat-sessions.yaml
# plan: 1P1D h100-sxm TP1 / h100-sxm TP1 request cache affinity + host-dram-pcie5 1.00 TiB; 2 GPUs; goodput 21.41 req/s
# at that rate: TTFT P90 889.5 ms, TPOT P90 32.41 ms
# model: meta-llama/Llama-3.1-8B-Instruct
# prefill: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# WARNING: the plan was priced with least-loaded prefill routing, but vLLM's toy proxy round-robins requests over the prefillers (it has no policy option), so its TTFT may differ from the plan's: search with `routing: [round-robin]` in the scenario's search block for numbers this router meets
# WARNING: the plan was priced with prefix-affinity routing, but vLLM 0.20.1 has no prefix-affine router (its toy proxy and any load balancer spread requests): affinity is not enforced
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-loaded prefill routing and prefix affinity on the prefill pool (cache.routing affinity); vLLM's toy proxy round-robins over prefillers and decoders
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
    # prefill: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 1)) $((SLOT * 1 + 0)))" \
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT="$((5600 + SLOT))" \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-8B-Instruct \
      --port "$((8100 + SLOT))" \
      --tensor-parallel-size 1 \
      --max-num-batched-tokens 8192 \
      --gpu-memory-utilization 0.9 \
      --max-model-len 131072 \
      --dtype bfloat16 \
      --enable-prefix-caching \
      --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_producer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"},{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":137438953472}}]}}'
    ;;
  decode)
    # decode: 1 x TP1 (1 GPU each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 1)) $((SLOT * 1 + 0)))" \
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT="$((5600 + SLOT))" \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-8B-Instruct \
      --port "$((8200 + SLOT))" \
      --tensor-parallel-size 1 \
      --max-num-seqs 256 \
      --max-num-batched-tokens 8192 \
      --gpu-memory-utilization 0.9 \
      --max-model-len 131072 \
      --dtype bfloat16 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
    ;;
  proxy)
    # routes each request to a prefiller, then to a decoder
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 1 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 1 ] || { echo "PREFILL_HOSTS needs 1 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 1 node addresses}"
    [ "${#decode_hosts[@]}" -eq 1 ] || { echo "DECODE_HOSTS needs 1 addresses" >&2; exit 2; }
    p_hosts=(); p_ports=(); d_hosts=(); d_ports=()
    for ((i = 0; i < 1; i++)); do h=${prefill_hosts[i / 1]}; k=$((i % 1)); p_hosts+=("$h"); p_ports+=($((8100 + k))); done
    for ((i = 0; i < 1; i++)); do h=${decode_hosts[i / 1]}; k=$((i % 1)); d_hosts+=("$h"); d_ports+=($((8200 + k))); done
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
