"""The expected error of a plan on a GPU pdplan has not measured: the cross-GPU validation's figures as data.

``pdplan/data/cross_gpu_error.yaml`` holds, per engine and mode (``dense``, ``moe``, ``disagg``), the median and P90
absolute error of mean TPOT and TTFT when the engine profile's end-to-end terms are fitted on one GPU's measured runs
and the other GPU's runs are predicted (H200 from H100 alone: ``benchmarks/cross_gpu_accuracy.py``,
docs/cross_gpu_accuracy.md §2). A plan whose kernel table is borrowed (:meth:`pdplan.io.catalog.Catalog.
borrowed_kernel_table`) prints its group's band: a lower bound, since those H200 rows were priced with H200's own
kernel table, where a borrowed table adds the donor's kernel efficiencies on top.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pdplan.specs.base import FrozenModel

Percent = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class ErrorBand(FrozenModel):
    """Median and P90 absolute error (%) of mean TPOT and TTFT over one group's predicted rows."""

    rows: Annotated[int, Field(strict=True, ge=1)]
    tpot_median_abs_pct: Percent
    tpot_p90_abs_pct: Percent
    ttft_median_abs_pct: Percent
    ttft_p90_abs_pct: Percent


class CrossGpuError(FrozenModel):
    """Per ``"<engine> <mode>"`` group, the error of predicting ``predicted`` from ``fitted_on`` alone."""

    schema_version: Literal[1]
    fitted_on: str
    predicted: str
    source: Annotated[str, Field(min_length=1)]
    groups: dict[str, ErrorBand]

    def band(self, engine: str, mode: str) -> ErrorBand | None:
        """The band of ``engine`` (``vllm``, ``sglang``, ``trtllm``) in ``mode`` (dense, moe, disagg); None where the
        validation has no such rows."""
        return self.groups.get(f"{engine} {mode}")

    def warning(self, gpu: str, donor: str, engine: str, mode: str) -> str:
        """The line a plan on a borrowed kernel table prints (module docstring)."""
        band = self.band(engine, mode)
        where = f"{gpu} runs on {donor}'s kernel efficiencies"
        if band is None:
            return f"{where}; the cross-GPU validation has no {engine} {mode} rows, so its error is not known"
        return (
            f"{where}; expected error on a GPU not measured ({engine} {mode}, {self.predicted} predicted from "
            f"{self.fitted_on} alone, {band.rows} rows): TPOT median {band.tpot_median_abs_pct:.0f} % "
            f"(P90 {band.tpot_p90_abs_pct:.0f} %), TTFT median {band.ttft_median_abs_pct:.0f} % "
            f"(P90 {band.ttft_p90_abs_pct:.0f} %), at least ({self.source})"
        )
