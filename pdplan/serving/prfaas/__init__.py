"""Prefill-as-a-Service (PrfaaS, arXiv 2604.15039): a remote prefill cluster serves prompts above a length threshold.

* :mod:`.lengths`: partial expectations ``E[f(L); L ≤ t]`` / ``E[f(L); L > t]`` of the input-length law,
  continuous in ``t`` (quantile quadrature), so the threshold can be searched with a bounded scalar search.
* :mod:`.profile`: prefill-time and KV-byte curves ``T(l)``, ``S(l)``: a measured profile (interpolated, like
  the paper's Table 5) or any callable of the same shape.
* :mod:`.capacity`: the paper's throughput model (Eqs. 3–8): Θ_prfaas, Θ_pd-p, Θ_pd-d, Λ_max, the threshold
  search (Eq. 7) and the prefill/decode split search (Eq. 8), with the homogeneous-PD and naive-heterogeneous
  baselines.
"""
