#!/usr/bin/env bash
# pdplan export --to trtllm: plan 1 of 3 from examples/opt-13b-a100-distserve.yaml
# plan: colocated 4x a100-sxm-80gb TP2 chunked; 8 GPUs; goodput 38.34 req/s
# at that rate: TTFT P90 244.5 ms, TPOT P90 75.65 ms
# model: facebook/opt-13b
# colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
# tokens per step: 2048, the chunk pdplan priced chunked prefill with (priced.roles.colocated.max_num_batched_tokens)
# WARNING: the plan was priced with the vllm engine profile, but it is exported for trtllm
# WARNING: kv_cache_config.free_gpu_memory_fraction is not written: TensorRT-LLM's is a share of the memory left after the weights (default 0.9), not the share of the whole GPU the plan records; set it by hand so that each server holds the KV the plan priced
# engine: targets TensorRT-LLM 1.3.0rc14 (pinned by Dynamo 1.2.1; its arguments: pdplan/data/export/engine_args/trtllm-*.json); the plan was priced with the vllm engine profile
# routing: priced with random colocated routing; no router (trtllm-serve disaggregated needs context servers): put the instances behind a load balancer
#
# Usage: bash THIS_FILE colocated SLOT
#   once per instance, on its node, with HOST_IP set (SLOT picks its GPUs and --port); TensorRT-LLM ships no load
#     balancer for separate servers (trtllm-serve disaggregated joins context and generation servers, and refuses
#     a config without context servers): put two or more instances behind one (round-robin).
set -euo pipefail
role="${1:?usage: $0 colocated}"
case "$role" in
  colocated)
    # colocated: 4 x TP2 (2 GPUs each) on a100-sxm-80gb (NVIDIA A100 SXM4 80GB)
    # 4 a node in slots 0..3, 1 node(s) of 8 GPUs; on node n, instance n*4+SLOT: bash THIS_FILE colocated SLOT
    SLOT="${2:-0}"
    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le 3 ] || { echo "SLOT must be 0..3 (4 instance(s) a node)" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-colocated-$SLOT.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 2
pipeline_parallel_size: 1
max_batch_size: 256
max_num_tokens: 2048
max_seq_len: 2048
enable_chunked_prefill: true
dtype: bfloat16
YAML
    CUDA_VISIBLE_DEVICES="$(seq -s, $((SLOT * 2)) $((SLOT * 2 + 1)))" \
    exec trtllm-serve facebook/opt-13b \
      --host "${HOST_IP:?set HOST_IP to the address of this instance}" \
      --port "$((8000 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  *) echo "usage: $0 colocated" >&2; exit 2 ;;
esac
