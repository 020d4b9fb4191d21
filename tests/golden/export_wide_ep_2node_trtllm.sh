#!/usr/bin/env bash
# pdplan export --to trtllm: plan 1 of 5 from examples/deepseek-v3-wide-ep.yaml (wide-ep-request-2node-no-tbo)
# plan: 1P1D h200-sxm TP1 DP16 EP16 / h200-sxm TP1 DP16 EP16 request; 32 GPUs; goodput 50.32 req/s
# at that rate: TTFT P90 857.7 ms, TPOT P90 149.9 ms
# model: deepseek-ai/DeepSeek-V3
# prefill: 1 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# decode: 1 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
# WARNING: the plan was priced with the sglang engine profile, but it is exported for trtllm
# WARNING: kv_cache_config.free_gpu_memory_fraction is not written: TensorRT-LLM's is a share of the memory left after the weights (default 0.9), not the share of the whole GPU the plan records; set it by hand so that each server holds the KV the plan priced
# WARNING: the plan is priced with FP8 weights: TensorRT-LLM loads them from an FP8-quantized checkpoint (no online quantization flag), so pass one with --model-id
# WARNING: the plan's MoE layers were priced with DeepEP all-to-all and DeepGEMM experts; TensorRT-LLM's WIDEEP backend, written for them, runs its own all-to-all and expert GEMMs, so its step times may differ; WIDEEP is a MoeConfig.backend choice in the source copy the keys were checked against, but not in NVIDIA's LLM-API reference for 1.3.0rc26 and later: check that your release accepts it
# engine: targets TensorRT-LLM 1.3.0rc14 (pinned by Dynamo 1.2.1; its arguments: pdplan/data/export/engine_args/trtllm-*.json); the plan was priced with the sglang engine profile
# routing: priced with least-loaded prefill, random decode routing; trtllm-serve disaggregated runs context_servers router load_balancing, generation_servers router round_robin
# instances over nodes: srun --nodes --ntasks --distribution arbitrary --mpi pmix, checked against Slurm 25.11.7's options (pdplan/data/export/engine_args/srun-25.11.7.json); not checked: that this cluster's Slurm has the PMIx plugin (srun --mpi=list), and trtllm-llmapi-launch, which has no options to check (it runs the command it is given: the server on rank 0, MPI workers on the other ranks)
#
# Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE server
#   prefill (context), decode (generation): once per instance, on its node, with HOST_IP set to that node's address;
#     SLOT picks the instance's GPUs (CUDA_VISIBLE_DEVICES) and --port on a shared node; each writes its
#     --extra_llm_api_options YAML under TRTLLM_CONFIG_DIR (default /tmp).
#   server: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order):
#     writes disagg.yaml and runs trtllm-serve disaggregated on all interfaces.
#   a role whose instance spans nodes (its comment says so): bash THIS_FILE ROLE once per instance,
#     inside a Slurm allocation that holds its nodes, on its node 0 (rank 0 reads the YAML there; or set
#     TRTLLM_CONFIG_DIR to a folder every node sees), with ROLE_NODES (e.g. PREFILL_NODES) its node names, node 0
#     first: srun places rank 0, the server, on node 0, the address the server case lists for it (node 0 of each
#     instance in PREFILL_HOSTS).
set -euo pipefail
role="${1:?usage: $0 prefill|decode|server}"
case "$role" in
  prefill)
    # prefill: 1 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs: one MPI world of 16 ranks, 8 a node, rank 0 (the server) on node 0; 2 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE prefill once, inside a Slurm allocation holding them, with PREFILL_NODES their names (node 0 first)
    read -r -a nodes <<< "${PREFILL_NODES:?set PREFILL_NODES to the 2 node addresses}"
    [ "${#nodes[@]}" -eq 2 ] || { echo "PREFILL_NODES needs 2 addresses" >&2; exit 2; }
    for n in "${nodes[@]}"; do [[ "$n" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "PREFILL_NODES: not a node name: $n" >&2; exit 2; }; done
    SLOT=0
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-prefill-${nodes[0]}.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 16
pipeline_parallel_size: 1
enable_attention_dp: true
moe_expert_parallel_size: 16
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
    hostfile="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-prefill-${nodes[0]}.hosts"
    for n in "${nodes[@]}"; do for ((r = 0; r < 8; r++)); do echo "$n"; done; done > "$hostfile"
    SLURM_HOSTFILE="$hostfile" \
    exec srun \
      --nodes 2 \
      --ntasks 16 \
      --distribution arbitrary \
      --mpi pmix \
      trtllm-llmapi-launch trtllm-serve deepseek-ai/DeepSeek-V3 \
      --host 0.0.0.0 \
      --port "$((8001 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  decode)
    # decode: 1 x TP1 DP16 EP16 (16 GPUs each) on h200-sxm (NVIDIA H200 SXM 141GB)
    # one instance on 2 nodes of 8 GPUs: one MPI world of 16 ranks, 8 a node, rank 0 (the server) on node 0; 2 node(s); instance i on nodes i*2..i*2+1: bash THIS_FILE decode once, inside a Slurm allocation holding them, with DECODE_NODES their names (node 0 first)
    read -r -a nodes <<< "${DECODE_NODES:?set DECODE_NODES to the 2 node addresses}"
    [ "${#nodes[@]}" -eq 2 ] || { echo "DECODE_NODES needs 2 addresses" >&2; exit 2; }
    for n in "${nodes[@]}"; do [[ "$n" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "DECODE_NODES: not a node name: $n" >&2; exit 2; }; done
    SLOT=0
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-decode-${nodes[0]}.yaml"
    mkdir -p "$(dirname "$cfg")"
    cat > "$cfg" <<'YAML'
tensor_parallel_size: 16
pipeline_parallel_size: 1
enable_attention_dp: true
moe_expert_parallel_size: 16
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
    hostfile="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-decode-${nodes[0]}.hosts"
    for n in "${nodes[@]}"; do for ((r = 0; r < 8; r++)); do echo "$n"; done; done > "$hostfile"
    SLURM_HOSTFILE="$hostfile" \
    exec srun \
      --nodes 2 \
      --ntasks 16 \
      --distribution arbitrary \
      --mpi pmix \
      trtllm-llmapi-launch trtllm-serve deepseek-ai/DeepSeek-V3 \
      --host 0.0.0.0 \
      --port "$((8101 + SLOT))" \
      --backend pytorch \
      --extra_llm_api_options "$cfg"
    ;;
  server)
    # routes each request to a context server, then to a generation server
    read -r -a prefill_hosts <<< "${PREFILL_HOSTS:?set PREFILL_HOSTS to the 2 node addresses}"
    [ "${#prefill_hosts[@]}" -eq 2 ] || { echo "PREFILL_HOSTS needs 2 addresses" >&2; exit 2; }
    read -r -a decode_hosts <<< "${DECODE_HOSTS:?set DECODE_HOSTS to the 2 node addresses}"
    [ "${#decode_hosts[@]}" -eq 2 ] || { echo "DECODE_HOSTS needs 2 addresses" >&2; exit 2; }
    cfg="${TRTLLM_CONFIG_DIR:-/tmp}/pdplan-trtllm-disagg.yaml"
    mkdir -p "$(dirname "$cfg")"
    printf 'hostname: 0.0.0.0\nport: 8000\n' > "$cfg"
    printf 'context_servers:\n  num_instances: 1\n  router:\n    type: load_balancing\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 1; i++)); do h=${prefill_hosts[i * 2]}; k=0; printf '    - "%s:%s"\n' "$h" $((8001 + k)) >> "$cfg"; done
    printf 'generation_servers:\n  num_instances: 1\n  router:\n    type: round_robin\n  urls:\n' >> "$cfg"
    for ((i = 0; i < 1; i++)); do h=${decode_hosts[i * 2]}; k=0; printf '    - "%s:%s"\n' "$h" $((8101 + k)) >> "$cfg"; done
    exec trtllm-serve disaggregated \
      -c "$cfg"
    ;;
  *) echo "usage: $0 prefill|decode|server" >&2; exit 2 ;;
esac
