#!/usr/bin/env bash
# pdplan export --to vllm: plan 2 of 5 from examples/deepseek-v3-wide-ep.yaml (wide-ep-request-2node)
# plan: 2P2D h200-sxm TP1 DP16 EP16 / h200-sxm TP1 DP16 EP16 request; 64 GPUs; goodput 126.7 req/s
# at that rate: TTFT P90 1337 ms, TPOT P90 121.1 ms
# model: deepseek-ai/DeepSeek-V3
# prefill: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# decode: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# WARNING: the plan was priced with the sglang engine profile, but it is exported for vllm
# WARNING: the plan was priced with least-loaded prefill routing, but vLLM's toy proxy round-robins requests over the prefillers (it has no policy option), so its TTFT may differ from the plan's: search with `routing: [round-robin]` in the scenario's search block for numbers this router meets
# WARNING: the plan priced its KV transfer with the mooncake-te backend, which vllm is not set up to run here (engines.vllm.transfer_backends in pdplan/data/export/targets.yaml): NixlConnector is written, so the transfer time may differ from the plan's
# engine: targets vLLM 0.20.1 (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with the sglang 0.5.1.post1 engine profile
# routing: priced with least-loaded prefill routing; vLLM's toy proxy round-robins over prefillers and decoders
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE proxy
#   prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
#     instance's GPUs (CUDA_VISIBLE_DEVICES), --port and VLLM_NIXL_SIDE_CHANNEL_PORT on a shared node.
#   proxy: once, from a vLLM source checkout, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses,
#     space-separated, in node order).
#   a role whose instance spans nodes (its comment says so) takes NODE (0..nodes-1) in place of SLOT, on
#     each of the instance's nodes, with HEAD_IP set to the address of its node 0 (which serves its port).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|proxy}"
case "$role" in
  prefill)
    # prefill: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs (8 data-parallel ranks a node), 4 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE prefill NODE (0..1) on each, HEAD_IP the address of its node 0
    NODE="${2:-0}"
    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le 1 ] || { echo "NODE must be 0..1 (the instance spans 2 nodes)" >&2; exit 2; }
    if [ "$NODE" -eq 0 ]; then
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
      VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
      UCX_NET_DEVICES=all \
      exec vllm serve deepseek-ai/DeepSeek-V3 \
        --port 8100 \
        --tensor-parallel-size 1 \
        --data-parallel-size 16 \
        --data-parallel-size-local 8 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}" \
        --data-parallel-rpc-port 29550 \
        --enable-expert-parallel \
        --max-num-batched-tokens 8192 \
        --gpu-memory-utilization 0.874 \
        --max-model-len 163840 \
        --quantization fp8 \
        --kv-cache-dtype fp8 \
        --all2all-backend deepep_high_throughput \
        --enable-dbo \
        --enable-eplb \
        --eplb-config '{"num_redundant_experts":32}' \
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
    else
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
      VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
      UCX_NET_DEVICES=all \
      exec vllm serve deepseek-ai/DeepSeek-V3 \
        --headless \
        --tensor-parallel-size 1 \
        --data-parallel-size 16 \
        --data-parallel-size-local 8 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}" \
        --data-parallel-rpc-port 29550 \
        --data-parallel-start-rank "$((NODE * 8))" \
        --enable-expert-parallel \
        --max-num-batched-tokens 8192 \
        --gpu-memory-utilization 0.874 \
        --max-model-len 163840 \
        --quantization fp8 \
        --kv-cache-dtype fp8 \
        --all2all-backend deepep_high_throughput \
        --enable-dbo \
        --enable-eplb \
        --eplb-config '{"num_redundant_experts":32}' \
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
    fi
    ;;
  decode)
    # decode: 2 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs (8 data-parallel ranks a node), 4 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE decode NODE (0..1) on each, HEAD_IP the address of its node 0
    NODE="${2:-0}"
    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le 1 ] || { echo "NODE must be 0..1 (the instance spans 2 nodes)" >&2; exit 2; }
    if [ "$NODE" -eq 0 ]; then
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
      VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
      UCX_NET_DEVICES=all \
      exec vllm serve deepseek-ai/DeepSeek-V3 \
        --port 8200 \
        --tensor-parallel-size 1 \
        --data-parallel-size 16 \
        --data-parallel-size-local 8 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}" \
        --data-parallel-rpc-port 29550 \
        --enable-expert-parallel \
        --max-num-seqs 256 \
        --max-num-batched-tokens 8192 \
        --gpu-memory-utilization 0.874 \
        --max-model-len 163840 \
        --quantization fp8 \
        --kv-cache-dtype fp8 \
        --all2all-backend deepep_low_latency \
        --enable-dbo \
        --enable-eplb \
        --eplb-config '{"num_redundant_experts":32}' \
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
    else
      CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
      VLLM_NIXL_SIDE_CHANNEL_HOST="${HOST_IP:?set HOST_IP to the address of this instance}" \
      VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
      UCX_NET_DEVICES=all \
      exec vllm serve deepseek-ai/DeepSeek-V3 \
        --headless \
        --tensor-parallel-size 1 \
        --data-parallel-size 16 \
        --data-parallel-size-local 8 \
        --data-parallel-address "${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}" \
        --data-parallel-rpc-port 29550 \
        --data-parallel-start-rank "$((NODE * 8))" \
        --enable-expert-parallel \
        --max-num-seqs 256 \
        --max-num-batched-tokens 8192 \
        --gpu-memory-utilization 0.874 \
        --max-model-len 163840 \
        --quantization fp8 \
        --kv-cache-dtype fp8 \
        --all2all-backend deepep_low_latency \
        --enable-dbo \
        --enable-eplb \
        --eplb-config '{"num_redundant_experts":32}' \
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
    fi
    ;;
  proxy)
    # routes each request to a prefiller, then to a decoder
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 4 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 4 ] || { echo "PREFILL_HOSTS needs 4 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 4 node addresses}"
    [ "${#decode_hosts[@]}" -eq 4 ] || { echo "DECODE_HOSTS needs 4 addresses" >&2; exit 2; }
    p_hosts=(); p_ports=(); d_hosts=(); d_ports=()
    for ((i = 0; i < 2; i++)); do h=${prefill_hosts[i * 2]}; k=0; p_hosts+=("$h"); p_ports+=($((8100 + k))); done
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i * 2]}; k=0; d_hosts+=("$h"); d_ports+=($((8200 + k))); done
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
