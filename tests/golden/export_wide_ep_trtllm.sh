#!/usr/bin/env bash
# pdplan export --to trtllm: plan 1 of 5 from examples/deepseek-v3-wide-ep.yaml (wide-ep-request-no-tbo)
# plan: 1P2D h200-sxm TP1 DP8 EP8 / h200-sxm TP1 DP8 EP8 request; 24 GPUs; goodput 31.18 req/s
# at that rate: TTFT P90 4895 ms, TPOT P90 59.93 ms
# model: deepseek-ai/DeepSeek-V3
# prefill: 1 x TP1 DP8 EP8 (8 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# decode: 2 x TP1 DP8 EP8 (8 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# WARNING: the plan was priced with the sglang engine profile, but it is exported for trtllm
# WARNING: kv_cache_config.free_gpu_memory_fraction is not written: TensorRT-LLM's is a share of the memory left after the weights (default 0.9), not the share of the whole GPU the plan records; set it by hand so that each server holds the KV the plan priced
# WARNING: the plan is priced with FP8 weights: TensorRT-LLM loads them from an FP8-quantized checkpoint (no online quantization flag), so pass one with --model-id
# WARNING: the plan's MoE layers were priced with DeepEP all-to-all and DeepGEMM experts; TensorRT-LLM's WIDEEP backend, written for them, runs its own all-to-all and expert GEMMs, so its step times may differ; WIDEEP is a MoeConfig.backend choice in the source copy the keys were checked against, but not in NVIDIA's LLM-API reference for 1.3.0rc26 and later: check that your release accepts it
# engine: targets TensorRT-LLM 1.3.0rc14 (pinned by Dynamo 1.2.1; its arguments: pdplan/data/export/engine_args/trtllm-*.json); the plan was priced with the sglang engine profile
# routing: priced with least-loaded prefill, random decode routing; trtllm-serve disaggregated runs context_servers router load_balancing, generation_servers router round_robin
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE server
#   prefill (context), decode (generation): once per instance, on its node, with HOST_IP set to that node's address;
#     SLOT picks the instance's GPUs (CUDA_VISIBLE_DEVICES) and --port on a shared node; each writes its
#     --extra_llm_api_options YAML under TRTLLM_CONFIG_DIR (default /tmp).
#   server: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order):
#     writes disagg.yaml and runs trtllm-serve disaggregated on all interfaces.
set -euo pipefail
role="${1:?usage: $0 prefill|decode|server}"
case "$role" in
  prefill)
    # prefill: 1 x TP1 DP8 EP8 (8 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # 1 a node in slots 0..0, 1 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-prefill-$SLOT.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 8
pipeline_parallel_size: 1
enable_attention_dp: true
moe_expert_parallel_size: 8
moe_config:
  backend: WIDEEP
  load_balancer:
    num_slots: 288
max_num_tokens: 8192
max_seq_len: 163840
enable_chunked_prefill: true
kv_cache_config:
  dtype: fp8
cache_transceiver_config:
  backend: NIXL
YAML
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 8)) $((SLOT * 8 + 7)))" \
    exec trtllm-serve deepseek-ai/DeepSeek-V3 \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((8001 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  decode)
    # decode: 2 x TP1 DP8 EP8 (8 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # 1 a node in slots 0..0, 2 node(s) of 8 GPUs; on node n, instance n*1+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 0 ] || { echo "SLOT must be 0..0 (1 instance(s) a node)" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-decode-$SLOT.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 8
pipeline_parallel_size: 1
enable_attention_dp: true
moe_expert_parallel_size: 8
moe_config:
  backend: WIDEEP
  load_balancer:
    num_slots: 288
max_batch_size: 4096
max_num_tokens: 8192
max_seq_len: 163840
enable_chunked_prefill: true
kv_cache_config:
  dtype: fp8
cache_transceiver_config:
  backend: NIXL
YAML
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 8)) $((SLOT * 8 + 7)))" \
    exec trtllm-serve deepseek-ai/DeepSeek-V3 \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((8101 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  server)
    # routes each request to a context server, then to a generation server
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 1 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 1 ] || { echo "PREFILL_HOSTS needs 1 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 node addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-disagg.yaml"
    mkdir -p "$(dirname "$cfg")"
    printf 'hostname: 0.0.0.0\nport: 8000\n' > "$cfg"
    printf 'context_servers:\n  num_instances: 1\n  router:\n    type: load_balancing\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 1; i++)); do h=${prefill_hosts[i / 1]}; k=$((i % 1)); printf '    - "%s:%s"\n' "$h" $((8001 + k)) >> "$cfg"; done
    printf 'generation_servers:\n  num_instances: 2\n  router:\n    type: round_robin\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i / 1]}; k=$((i % 1)); printf '    - "%s:%s"\n' "$h" $((8101 + k)) >> "$cfg"; done
    exec trtllm-serve disaggregated \
      -c "$cfg"
    ;;
  *) echo "usage: $0 prefill|decode|server" >&2; exit 2 ;;
esac
