"""One measured closed-loop benchmark run (``pdplan calibrate`` on benchmark results; files read by
:mod:`pdplan.io.benchmark_results`).

A run is what ``vllm bench serve --max-concurrency C``, SGLang's ``bench_serving`` or aiperf report for one
deployment: C clients at zero think time, fixed (or mean) prompt and output lengths, and the mean TTFT and TPOT
over the measured requests (TPOT = (E2E − TTFT)/(output tokens − 1) per request, as those tools define it;
docs/engines.md §3). Units are SI (seconds); files carry milliseconds and are converted at the
edge.
"""

from typing import Annotated, Literal

from pydantic import Field

from pdplan.specs.base import FrozenModel

PosInt = Annotated[int, Field(strict=True, ge=1)]
Tokens = Annotated[float, Field(ge=1.0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]
Dtype = Literal["bf16", "fp8"]


class BenchmarkRun(FrozenModel):
    """One benchmark row: deployment (engine, GPU, model, parallelism, dtypes), load (ISL, OSL, concurrency) and the
    measured means. ``isl``/``osl`` are mean tokens per request (fixed lengths for ``random`` datasets).

    ``source`` names the file and line (or record) the run came from; ``from_flags`` lists the fields the file did
    not record and the command line supplied; ``extra`` keeps a CSV's other columns, echoed in reports."""

    engine: Text
    gpu: Text
    model: Text
    tp: PosInt
    isl: Tokens
    osl: Tokens
    concurrency: PosInt
    ttft_s: Seconds
    tpot_s: Seconds
    dtype: Dtype = "bf16"
    kv_dtype: Dtype = "bf16"
    pp: PosInt = 1
    ep: PosInt = 1
    dp: PosInt = 1
    num_requests: PosInt | None = None
    source: Text
    from_flags: tuple[str, ...] = ()
    extra: dict[str, str] = Field(default_factory=dict)
