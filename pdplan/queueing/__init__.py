"""Pure-numpy queueing core of pdplan (docs/queueing.md §1–§3, §5).

Inputs are floats and numpy arrays (a discretised workload is arrays of bin values and
probabilities);
every model is batched over a 1-D array of arrival rates and returns a distribution object with
``mean_s``, ``cdf(t)`` and ``quantile(q)``. See each module's docstring for the model, its
assumptions, citations and measured errors.
"""

from pdplan.queueing.attainment import goodput_rate, joint_attainment, ttft_attainment
from pdplan.queueing.colocated_queue import (
    SCHEDULERS,
    ColocatedResult,
    colocated_chunked,
    colocated_distributions,
    colocated_prefill_first,
)
from pdplan.queueing.decode import (
    DecodeCapacity,
    DecodeFixedPoint,
    DecodeWorkload,
    LinearStepTime,
    StepTimeFn,
    decode_capacity,
    decode_fixed_point,
    decode_workload,
    kv_footprint,
    load_noise,
    tpot_distribution,
)
from pdplan.queueing.distributions import (
    GammaMixture,
    ShiftedMixture,
    WaitDistribution,
    mixture_quantile,
)
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.mg1 import (
    distserve_inter_op_ttft_s,
    distserve_intra_op_ttft_s,
    distserve_md1_ttft_s,
    mg1_wait_distribution,
    pipeline_mean_ttft_s,
    pk_wait_moments,
    service_moments,
)
from pdplan.queueing.mgc import (
    ROUTING_POLICIES,
    RoutingPolicy,
    allen_cunneen_wait_s,
    least_work_wait_distribution,
    prefill_wait_distribution,
    round_robin_wait_distribution,
)

__all__ = [
    "ROUTING_POLICIES",
    "SCHEDULERS",
    "ColocatedResult",
    "DecodeCapacity",
    "DecodeFixedPoint",
    "DecodeWorkload",
    "GammaMixture",
    "LinearStepTime",
    "RoutingPolicy",
    "ShiftedMixture",
    "StepTimeFn",
    "WaitDistribution",
    "allen_cunneen_wait_s",
    "colocated_chunked",
    "colocated_distributions",
    "colocated_prefill_first",
    "decode_capacity",
    "decode_fixed_point",
    "decode_workload",
    "distserve_inter_op_ttft_s",
    "distserve_intra_op_ttft_s",
    "distserve_md1_ttft_s",
    "erlang_c",
    "goodput_rate",
    "joint_attainment",
    "kv_footprint",
    "least_work_wait_distribution",
    "load_noise",
    "mg1_wait_distribution",
    "mixture_quantile",
    "pipeline_mean_ttft_s",
    "pk_wait_moments",
    "prefill_wait_distribution",
    "round_robin_wait_distribution",
    "service_moments",
    "tpot_distribution",
    "ttft_attainment",
]
