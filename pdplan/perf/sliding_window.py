"""Sliding-window attention layers priced with the causal-attention kernels: the equivalent (batch, context).

A layer with window W lets each token attend to at most the last W tokens (itself included).

* decode: a step for a sequence at context c reads min(c, W) tokens' K/V, so it is the decode kernel at
  context min(c, W) (the KV it reads, and, for an engine that frees out-of-window blocks such as vLLM's hybrid
  KV-cache manager, the KV it holds).
* prefill: a prompt of L tokens has P(L) = L(L+1)/2 query-key pairs when L <= W and
  W(W+1)/2 + (L − W)·W beyond (the first W tokens see all before them, every later one exactly W). The causal
  kernel of ``batch`` prompts of c tokens does batch·c(c+1)/2 pairs; pricing the window layer as
  b' = batch·P(L)/(c'(c'+1)/2) prompts of c' = min(L, 2W) tokens does the same pairs in tiles of the window's
  span, and reads b'·c' ≈ batch·L query rows (exactly at L <= W, within W/(2W+1) relative above).

Example: L = 8192, W = 128: P = 8,256 + 8,064·128 = 1,040,448 pairs; c' = 256, b' = 1,040,448/32,896 = 31.63
prompts of 256 tokens per prompt, against 33,558,528 pairs for full causal attention (32x fewer).
"""

from __future__ import annotations

import numpy as np

from pdplan.types import ArrayLike, FloatArray


def window_pairs(prompt_tokens: ArrayLike, window: float) -> FloatArray:
    """Query-key pairs of one prompt of L tokens under a window W (module docstring)."""
    n = np.asarray(prompt_tokens, dtype=np.float64)
    inside = n * (n + 1.0) / 2.0
    beyond = window * (window + 1.0) / 2.0 + (n - window) * window
    out: FloatArray = np.where(n <= window, inside, beyond)
    return out


def window_prefill_shape(batch: ArrayLike, prompt_tokens: ArrayLike, window: float) -> tuple[FloatArray, FloatArray]:
    """(b', c'): causal prefill attention of b' prompts of c' tokens with the pairs of the windowed layer."""
    n = np.asarray(prompt_tokens, dtype=np.float64)
    span = np.minimum(n, 2.0 * window)
    pairs_per_prompt = np.maximum(span * (span + 1.0) / 2.0, 1.0)
    b_eq: FloatArray = np.asarray(batch, dtype=np.float64) * window_pairs(n, window) / pairs_per_prompt
    return b_eq, span


def window_decode_context(context_tokens: ArrayLike, window: float) -> FloatArray:
    """Tokens a decode step reads K/V for under a window W: min(context, W)."""
    out: FloatArray = np.minimum(np.asarray(context_tokens, dtype=np.float64), float(window))
    return out
