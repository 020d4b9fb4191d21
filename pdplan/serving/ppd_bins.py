"""Which prompt bins the turns a PPD policy places on decode come from (docs/prefix_cache.md §11).

A policy decides on a turn's append alone (``threshold``: its length; ``score``: its length's group), so the turns it
places are not a random sample of their turn index: a 256-token threshold places the turns with short appends, whose
prompts are shorter than their turn's average. The prompt bins the placement takes from the prefill pool (and the
P→D bytes it saves) follow the placed turns' own prompt law, not the turn's.

Turn t's prompt is its history and its append, ``H_{t−1} + m_t`` with ``H_{t−1} = system + (t − 1)·(new + output)``,
the parts independent (:func:`pdplan.serving.prefix_cache.turn_bins`' law). The append law is split into classes
the policies decide on: the values below the threshold (class 0), then the values at or above it by their group
(:class:`pdplan.serving.ppd.AppendGroups`: ``score`` decides per group). For each class c and turn t,

    P(prompt bin k, m_t ∈ c | turn t) = Σ_{v ∈ c} P(m = v)·P(H_{t−1} + v ∈ bin k)

is one product of spectra on a token grid (the history's law, then the class's part of the append law) and one
inverse FFT; a policy's placed mass per turn is the sum over the classes it places.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pdplan.serving.ppd import AppendGroups
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.token_pmf import length_pmf
from pdplan.types import FloatArray, IntArray

GRID_CELLS = 2**14
"""Token-grid cells at most (a step of ``span / 2^14`` tokens: far finer than the prompt bins)."""


def append_classes(values: FloatArray, groups: AppendGroups, threshold: float) -> IntArray:
    """Per value of the append law its class: 0 below ``threshold``, else 1 + its group (module docstring)."""
    return np.asarray(np.where(values < threshold, 0, 1 + groups.member), dtype=np.intp)


def class_bins(spec: SessionsSpec, turns: int, edges: FloatArray, threshold: float) -> FloatArray:
    """``[C, T, K]``: P(prompt bin k, append in class c | turn t) (module docstring; C = 1 + the append groups),
    computed once per (spec, turns, edges, threshold): it depends on neither the rate nor the capacities (the cache
    keys the spec by its JSON: a histogram law's lists are not hashable)."""
    return _class_bins_cached(spec.model_dump_json(), turns, tuple(float(e) for e in edges), float(threshold))


@functools.lru_cache(maxsize=32)
def _class_bins_cached(spec_json: str, turns: int, edges: tuple[float, ...], threshold: float) -> FloatArray:
    spec = SessionsSpec.model_validate_json(spec_json)
    out = _class_bins_of(spec, turns, np.asarray(edges, dtype=np.float64), threshold)
    out.flags.writeable = False
    return out


def _class_bins_of(spec: SessionsSpec, turns: int, edges: FloatArray, threshold: float) -> FloatArray:
    new, out = length_pmf(spec.new_tokens), length_pmf(spec.output_tokens)
    values = np.asarray(new.values, dtype=np.float64)
    classes = append_classes(values, AppendGroups.of(values, new.prob), threshold)
    span = turns * int(new.values[-1]) + max(turns - 1, 0) * int(out.values[-1]) + 1
    step = max(1, math.ceil(span / GRID_CELLS))
    size = int(2 ** math.ceil(math.log2(span // step + turns + 2)))

    def on_grid(tokens: FloatArray, prob: FloatArray) -> FloatArray:
        dense = np.zeros(size)
        np.add.at(dense, np.round(tokens / step).astype(np.int64), prob)
        return dense

    step_hat = np.fft.rfft(on_grid(values, new.prob)) * np.fft.rfft(on_grid(out.values.astype(np.float64), out.prob))
    masses = [np.where(classes == c, new.prob, 0.0) for c in range(classes.max() + 1)]
    live = [c for c, mass in enumerate(masses) if np.any(mass != 0.0)]  # a class without mass has none in any bin
    parts = np.stack([np.fft.rfft(on_grid(values, masses[c])) for c in live])
    tokens = spec.system_prompt_tokens + np.arange(size) * float(step)
    idx = np.clip(np.searchsorted(edges, tokens, side="right") - 1, 0, edges.size - 2)
    result = np.zeros((len(masses), turns, edges.size - 1))
    history = np.ones(step_hat.shape, dtype=np.complex128)  # H_0 = the system prompt (the grid's origin)
    for t in range(turns):
        dense = np.clip(np.fft.irfft(history[None, :] * parts, size, axis=1), 0.0, None)
        for row, c in enumerate(live):
            result[c, t] = np.bincount(idx, weights=dense[row], minlength=edges.size - 1)
        history = history * step_hat
    return result
