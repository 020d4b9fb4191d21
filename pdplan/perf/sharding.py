"""Whether tensor and pipeline parallelism can shard a model at all, the rules every engine enforces at start-up,
checked once for every command that prices a TP/PP (``evaluate``, ``optimize``, ``roofline``, ``transfer``):

* TP divides the attention heads: tensor parallelism shards heads evenly (vLLM ``ColumnParallelLinear`` /
  ``QKVParallelLinear``, ``divide(total_num_heads, tp_size)``; SGLang and TensorRT-LLM alike).
* TP and the KV heads: either TP divides the KV heads, or the KV heads divide TP and each is replicated on
  ``tp / kv_heads`` GPUs (vLLM ``QKVParallelLinear``: ``if tp_size >= total_num_kv_heads: assert tp_size %
  total_num_kv_heads == 0``, else ``total_num_kv_heads % tp_size == 0``).
* PP at most the layers: each pipeline stage holds at least one layer (vLLM ``get_pp_indices`` partitions
  ``num_hidden_layers`` over the ranks; a rank with none is refused).
"""

from __future__ import annotations

from pdplan.specs.model import ModelSpec


def sharding_error(model: ModelSpec, tp: int, pp: int = 1) -> tuple[str, str] | None:
    """(field, reason) when ``tp`` / ``pp`` cannot shard ``model`` (module docstring), else None."""
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    if heads % tp:
        return "tp", (
            f"TP {tp} does not divide {model.name}'s {heads} attention heads (tensor parallelism shards heads evenly)"
        )
    if kv_heads % tp and tp % kv_heads:
        return "tp", (
            f"TP {tp} neither divides {model.name}'s {kv_heads} KV heads nor is a multiple of them "
            "(engines shard KV heads evenly or replicate each on tp / kv_heads GPUs)"
        )
    if pp > model.num_layers:
        return "pp", f"PP {pp} exceeds {model.name}'s {model.num_layers} layers (each pipeline stage holds a layer)"
    return None
