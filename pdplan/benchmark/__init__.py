"""Closed loops as benchmark clients run them: C clients, each sending its next request when its last one ends.

* :mod:`pdplan.benchmark.mva`: the mean-value fixed point ``X = C / E[R](X)`` on the open-loop model;
* :mod:`pdplan.benchmark.colocated_loop` and :mod:`pdplan.benchmark.disaggregated_loop`: what the engine's benchmark
  tool reports (start-up cohorts, warm-up and measured request counts, the steady state);
* :mod:`pdplan.benchmark.run`: the one entry point that computes both for a deployment at a concurrency.
"""
