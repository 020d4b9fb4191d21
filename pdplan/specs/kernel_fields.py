"""The constrained number types of the kernel-table schema (:mod:`pdplan.specs.kernel_table` and its parts).

Units follow the field names: seconds, FLOP/s, bytes, bytes/s, elements; fractions are efficiencies in (0, 1].
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

L2Mode = Literal["first", "lru"]

Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
Exponent = Annotated[float, Field(ge=1.0, le=64.0)]
HeadDimFactor = Annotated[float, Field(ge=0.5, le=1.0)]
Speedup = Annotated[float, Field(ge=1.0, le=64.0)]
TileSize = Annotated[int, Field(strict=True, ge=1, le=1024)]
