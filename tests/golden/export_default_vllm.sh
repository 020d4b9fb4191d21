#!/usr/bin/env bash
# pdplan export --to vllm: plan 1 of 5 from examples/default.yaml
# plan: 8P2D h100-sxm TP2 / h100-sxm TP4 request; 24 GPUs; goodput 43.35 req/s
# at that rate: TTFT P90 1765 ms, TPOT P90 49.45 ms
# model: meta-llama/Llama-3.1-70B-Instruct
# prefill: 8 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan was priced with the vllm 0.12.0 engine profile, but this file targets vLLM 0.20.1 (the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are vLLM 0.12.0's (host time per step, scheduler defaults); before relying on them, fit a profile to vLLM 0.20.1 benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run `pdplan optimize --engine ENGINE.yaml`
# WARNING: the plan was priced with least-work prefill routing, but vLLM's toy proxy round-robins requests over the prefillers (it has no policy option), so its TTFT may differ from the plan's: search with `routing: [round-robin]` in the scenario's search block for numbers this router meets
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the vllm 0.12.0 engine profile
# routing: priced with least-work prefill routing; vLLM's toy proxy round-robins over prefillers and decoders
#
# Usage: bash THIS_FILE prefill|decode|proxy
#   prefill, decode: once per instance, on its host, with HOST_IP set to that host's address. Instances that share
#     a node need their own GPUs (CUDA_VISIBLE_DEVICES), --port and VLLM_NIXL_SIDE_CHANNEL_PORT.
#   proxy: once, from a vLLM source checkout, with PREFILL_HOSTS and DECODE_HOSTS (space-separated addresses).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|proxy}"
case "$role" in
  prefill)
    # prefill: 8 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB); run once per instance, on its host
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-70B-Instruct \
      --port 8100 \
      --tensor-parallel-size 2 \
      --max-num-batched-tokens 8192 \
      --gpu-memory-utilization 0.9 \
      --max-model-len 35089 \
      --dtype bfloat16 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
    ;;
  decode)
    # decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB); run once per instance, on its host
    VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
    VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
    UCX_NET_DEVICES=all \
    exec vllm serve meta-llama/Llama-3.1-70B-Instruct \
      --port 8200 \
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
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 8 instance addresses}"
    [ "${#prefill_hosts[@]}" -eq 8 ] || { echo "PREFILL_HOSTS needs 8 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 instance addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    exec python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py \
      --host 0.0.0.0 \
      --port 8192 \
      --prefiller-hosts "${prefill_hosts[@]}" \
      --prefiller-ports 8100 8100 8100 8100 8100 8100 8100 8100 \
      --decoder-hosts "${decode_hosts[@]}" \
      --decoder-ports 8200 8200
    ;;
  *) echo "usage: $0 prefill|decode|proxy" >&2; exit 2 ;;
esac
