"""The workload's (input, output) cells as the decode and TPOT models see them, shared by every deployment model."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pdplan.queueing import DecodeWorkload, decode_workload
from pdplan.serving.resolve import ResolvedScenario


def decode_cells(res: ResolvedScenario[Any]) -> DecodeWorkload:
    """Flattened (input, output) cells: context L = input, n = max(output − 1, 1) decode steps; a model whose every
    layer is windowed holds and reads min(L + j, window) tokens at step j (``window_tokens``)."""
    lens = res.lengths
    lin = np.repeat(lens.input_tokens, lens.output_tokens.size)
    steps = np.maximum(np.tile(lens.output_tokens, lens.input_tokens.size) - 1.0, 1.0)
    return decode_workload(lin, steps, lens.prob.ravel(), res.model.kv_window_tokens)


def tpot_defined(res: ResolvedScenario[Any]) -> npt.NDArray[np.bool_]:
    """Cells whose TPOT exists: more than one output token (:mod:`pdplan.serving.snapshot`)."""
    lens = res.lengths
    return np.asarray(np.tile(lens.output_tokens > 1.0, lens.input_tokens.size))
