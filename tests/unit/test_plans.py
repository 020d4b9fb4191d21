"""A reported plan (pdplan.search.plans.Plan): its label, per-user rate and deployment, worked by hand."""

from __future__ import annotations

import pytest


def test_plan_label_spaces_pipeline_parallelism_like_every_other_label() -> None:
    """``h100-sxm TP4 PP2``, as the report's role text and RoleHardware.label write it (was ``TP4PP2``)."""
    from pdplan.search.plans import Plan
    from pdplan.serving.deployment import Disaggregated, Role

    d = Disaggregated(
        prefill=Role("h100-sxm", tp=4, pp=2, count=2),
        decode=Role("h100-sxm", tp=4, pp=1, count=1),
        granularity="layer",
        link="ib-ndr",
        routing="least-work",
    )
    plan = Plan.of(
        d,
        max_num_seqs=256,
        num_gpus=20,
        goodput_rps=1.0,
        output_tokens_per_s=100.0,
        cost_usd_per_hour=None,
        operating_rate_rps=1.0,
        binding_constraint="TTFT at P90",
        tpot_mean_s=0.05,
        exact=False,
    )
    assert plan.label == "2P1D h100-sxm TP4 PP2 / h100-sxm TP4 layer"
    assert plan.tokens_per_s_per_user == pytest.approx(20.0)
    assert plan.deployment == d  # the inverse of Plan.of
