"""KV throughput one prefill instance emits, per prompt length (the paper's Table 3 and Eq. 1; ``pdplan transfer
--sweep``).

``Φ_kv(l) = S_kv(l) / T_prefill(l)`` (arXiv 2604.15039 Eq. 1): ``S_kv`` from the KV model (every full-attention
layer's K/V or MLA latent per token, plus a hybrid's fixed per-sequence linear-attention state, sent once from
the prefill side, :func:`pdplan.transfer.kv.kv_bytes_per_request`) and ``T_prefill`` pdplan's roofline of one
prompt on the GPU × TP (batch 1). Φ is in decimal Gb/s (bits / 1e9 / s), as the paper prints it. A cluster of
``N`` GPUs with ``P`` per instance emits ``(N/P)·Φ_kv(L_avg)`` (Eq. 2).

The instance serves the checkpoint as the engines load it: weights at the checkpoint's dtype (an FP8 checkpoint in
FP8, as :func:`pdplan.serving.resolve.precision_of` prices every other pass) and the routed experts split ``tp`` ways
unless FP8 weight blocks forbid it, then expert-parallel over the ``tp`` GPUs
(:func:`pdplan.perf.block_quant.expert_parallel_for_blocks`; MiniMax-M2.5 at TP 8).

Lengths: ``1K``-style tokens read with K = 1024 (the paper's 128K column is 131,072 tokens).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.perf_data import perf_data
from pdplan.perf.block_quant import expert_parallel_for_blocks
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.serving.resolve import DTYPE_BYTES
from pdplan.transfer.kv import kv_bytes_per_request
from pdplan.transfer.kv_inputs import kv_shape_from_model

TOKEN_SUFFIX = {"k": 1024, "m": 1024 * 1024}


def parse_lengths(text: str, field: str = "--sweep") -> list[int]:
    """``"1K,8K,32K,128K"`` → [1024, 8192, 32768, 131072]; plain integers stay as given."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        scale = TOKEN_SUFFIX.get(part[-1:].lower(), 1) if part else 1
        digits = part[:-1] if scale != 1 else part
        try:
            value = float(digits) * scale
        except ValueError:
            raise SpecError(f"{part!r} is not a token count such as 8K or 8192", field=field) from None
        if value < 1 or value != int(value):
            raise SpecError(f"{part!r} must be a whole number of tokens >= 1", field=field)
        out.append(int(value))
    if not out:
        raise SpecError("give at least one length, e.g. 1K,8K,32K,128K", field=field)
    return out


def kv_throughput_sweep(
    catalog: Catalog, *, model: str, gpu: str, tp: int, lengths: list[int], kv_dtype: str = "bf16"
) -> dict[str, Any]:
    """Rows ``tokens, kv_bytes, prefill_s, kv_gbps`` for one instance of ``gpu`` × ``tp``; the document also names
    the weight dtype and the expert parallelism the prefill was priced at (module docstring)."""
    if kv_dtype not in DTYPE_BYTES:
        raise SpecError(f"{kv_dtype!r} is not one of bf16, fp8", field="--kv-dtype")
    spec, gpu_spec = catalog.model(model), catalog.gpu(gpu)
    kv_b = DTYPE_BYTES[kv_dtype]
    precision = Precision(weight_bytes=spec.checkpoint_weight_bytes, kv_bytes=kv_b)
    ep = expert_parallel_for_blocks(spec, tp, precision.weight_bytes)
    tokens = np.asarray(lengths, dtype=np.float64)
    kv_bytes = kv_bytes_per_request(tokens, kv_shape_from_model(spec, kv_b), decode_tp=1)
    table = catalog.kernel_table(gpu_spec.name)
    data = perf_data(spec, gpu_spec, table, tp=tp, ep=ep)
    prefill = np.array(
        [
            float(
                phase_time(
                    spec,
                    gpu_spec,
                    table,
                    phase="prefill",
                    batch=1,
                    tokens=n,
                    tp=tp,
                    precision=precision,
                    ep=ep,
                    data=data,
                ).time_s
            )
            for n in lengths
        ]
    )
    rows = [
        {"tokens": int(n), "kv_bytes": float(b), "prefill_s": float(t), "kv_gbps": float(b * 8 / t / 1e9)}
        for n, b, t in zip(lengths, kv_bytes, prefill, strict=True)
    ]
    return {
        "model": spec.name,
        "gpu": gpu_spec.name,
        "tp": tp,
        "ep": ep,
        "weight_dtype": spec.weight_dtype,
        "kv_dtype": kv_dtype,
        "rows": rows,
    }
