"""The warning a report carries when the queueing model's linear decode law fits its roofline loosely.

The queueing model behind ``evaluate`` and ``optimize`` prices a decode step with ``τ = t0 + t1·B + t2·K`` fitted to
the roofline over the instance's batches (:func:`pdplan.serving.roles.decode_perf`); every TPOT percentile and the
decode capacity bounds inherit the fit's error. The fit errors are in every JSON report's ``assumptions``; where they
exceed the accuracy targets the kernel models themselves are held to (median error ≤ 10 %, P90 ≤ 25 % per GPU and
dtype, issue #13, docs/kernel_accuracy.md: :data:`LAW_WARN_MEDIAN_REL_ERR`, :data:`LAW_WARN_MAX_REL_ERR`, the max
standing in for a P90 over the fit's few dozen points) the report says so in words too, since the law alone then
costs more than the kernels it approximates. Dense decode steps fit within them (Llama-3.1-70B TP4: 0.7 % median,
5.4 % max); a MoE step, concave in B while its experts saturate, often does not (DeepSeek-V3 DP16 EP16 on H200: 16 /
27 %; Qwen3-235B FP8 TP4 EP4: 14 / 38 %). docs/decode_law.md measures what the law costs at the examples' operating
points.
"""

from __future__ import annotations

from typing import Any

from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.roles import DecodePerf

LAW_WARN_MEDIAN_REL_ERR = 0.10
LAW_WARN_MAX_REL_ERR = 0.25


def decode_law_warning(perf: DecodePerf, label: str) -> str | None:
    """The warning for decode instance ``label`` whose law is ``perf`` (module docstring), or None when its fit errors
    are within both targets."""
    if perf.fit_median_rel_err <= LAW_WARN_MEDIAN_REL_ERR and perf.fit_max_rel_err <= LAW_WARN_MAX_REL_ERR:
        return None
    return (
        f"decode step law: the line t0 + t1*B + t2*K fits {label}'s roofline within "
        f"{perf.fit_median_rel_err * 100:.0f} % median, {perf.fit_max_rel_err * 100:.0f} % max over its batches; "
        "TPOT and the decode capacity carry that error (docs/decode_law.md)"
    )


def law_warnings(res: ResolvedScenario[Any], model: DisaggregatedModel | ColocatedModel) -> tuple[str, ...]:
    """:func:`decode_law_warning` for the decode (or colocated) instance of the deployment ``res`` is bound to, from
    the serving model's ``decode`` law."""
    text = decode_law_warning(model.decode, res.hardware.serving.label)
    return () if text is None else (text,)
