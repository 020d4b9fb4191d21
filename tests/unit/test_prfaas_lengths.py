"""Prompt-length laws of the PrfaaS model (pdplan.serving.prfaas.lengths): the quantile law's tail and head against
the lognormal's closed-form partial mean."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.serving.prfaas.lengths import QuantileLaw
from pdplan.specs.length_laws import LognormalDist


def test_quantile_law_matches_closed_form_partial_mean() -> None:
    dist = LognormalDist(dist="lognormal", mu=9.90, sigma=1.00, min=128, max=131072)
    law = QuantileLaw(dist)
    t = 19_400.0
    closed = float(dist.partial_mean(np.array([dist.upper]))[0] - dist.partial_mean(np.array([t]))[0])
    assert law.tail(lambda x: x, t) == pytest.approx(closed, rel=1e-6)
    assert law.tail_mass(t) == pytest.approx(1 - float(dist.cdf(np.array([t]))[0]))
    assert law.head(lambda x: np.ones_like(x), t) + law.tail_mass(t) == pytest.approx(1.0)
