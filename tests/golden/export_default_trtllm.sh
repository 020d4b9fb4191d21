#!/usr/bin/env bash
# pdplan export --to trtllm: plan 1 of 5 from examples/default.yaml
# plan: 10P2D h100-sxm TP2 / h100-sxm TP4 request; 28 GPUs; goodput 54.52 req/s
# at that rate: TTFT P90 1914 ms, TPOT P90 37.74 ms
# model: meta-llama/Llama-3.1-70B-Instruct
# prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
# WARNING: the plan was priced with the vllm engine profile, but it is exported for trtllm
# WARNING: kv_cache_config.free_gpu_memory_fraction is not written: TensorRT-LLM's is a share of the memory left after the weights (default 0.9), not the share of the whole GPU the plan records; set it by hand so that each server holds the KV the plan priced
# engine: targets TensorRT-LLM 1.3.0rc14 (pinned by Dynamo 1.2.1; its arguments: pdplan/data/export/engine_args/trtllm-*.json); the plan was priced with the vllm engine profile
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
    # prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 4 a node in slots 0..3, 3 node(s) of 8 GPUs; on node n, instance n*4+SLOT: bash THIS_FILE prefill SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 3 ] || { echo "SLOT must be 0..3 (4 instance(s) a node)" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-prefill-$SLOT.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 2
pipeline_parallel_size: 1
max_num_tokens: 8192
max_seq_len: 35089
enable_chunked_prefill: true
dtype: bfloat16
cache_transceiver_config:
  backend: NIXL
YAML
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 2)) $((SLOT * 2 + 1)))" \
    exec trtllm-serve meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((8001 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  decode)
    # decode: 2 x TP4 (4 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)
    # 2 a node in slots 0..1, 1 node(s) of 8 GPUs; on node n, instance n*2+SLOT: bash THIS_FILE decode SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 1 ] || { echo "SLOT must be 0..1 (2 instance(s) a node)" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-decode-$SLOT.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 4
pipeline_parallel_size: 1
max_batch_size: 256
max_num_tokens: 8192
max_seq_len: 131072
enable_chunked_prefill: true
dtype: bfloat16
cache_transceiver_config:
  backend: NIXL
YAML
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 4)) $((SLOT * 4 + 3)))" \
    exec trtllm-serve meta-llama/Llama-3.1-70B-Instruct \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((8101 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  server)
    # routes each request to a context server, then to a generation server
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 3 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 3 ] || { echo "PREFILL_HOSTS needs 3 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 1 node addresses}"
    [ "${#decode_hosts[@]}" -eq 1 ] || { echo "DECODE_HOSTS needs 1 addresses" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-disagg.yaml"
    mkdir -p "$(dirname "$cfg")"
    printf 'hostname: 0.0.0.0\nport: 8000\n' > "$cfg"
    printf 'context_servers:\n  num_instances: 10\n  router:\n    type: load_balancing\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 10; i++)); do h=${prefill_hosts[i / 4]}; k=$((i % 4)); printf '    - "%s:%s"\n' "$h" $((8001 + k)) >> "$cfg"; done
    printf 'generation_servers:\n  num_instances: 2\n  router:\n    type: round_robin\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 2; i++)); do h=${decode_hosts[i / 2]}; k=$((i % 2)); printf '    - "%s:%s"\n' "$h" $((8101 + k)) >> "$cfg"; done
    exec trtllm-serve disaggregated \
      -c "$cfg"
    ;;
  *) echo "usage: $0 prefill|decode|server" >&2; exit 2 ;;
esac
