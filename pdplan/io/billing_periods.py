"""Hours in a billing month and year (``pdplan/data/billing_periods.yaml``, sourced): the factors from $/h to $/month
and $/year."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pdplan.io.files import packaged_yaml


@dataclass(frozen=True)
class BillingPeriods:
    """``hours_per_month`` (730: 8,760 / 12) and ``hours_per_year`` (8,760: 365 x 24), with their sources."""

    hours_per_month: float
    hours_per_year: float
    sources: dict[str, str]


@lru_cache(maxsize=1)
def billing_periods() -> BillingPeriods:
    """The packaged billing periods."""
    data = packaged_yaml("billing_periods.yaml")
    return BillingPeriods(**data)


def per_month(usd_per_hour: float | None) -> float | None:
    """$/h x 730 h (None stays None: an unpriced plan)."""
    return None if usd_per_hour is None else usd_per_hour * billing_periods().hours_per_month


def per_year(usd_per_hour: float | None) -> float | None:
    """$/h x 8,760 h (None stays None: an unpriced plan)."""
    return None if usd_per_hour is None else usd_per_hour * billing_periods().hours_per_year
