"""Workloads as numbers: length laws binned into joint (input, output) cells, sampled, and refined into the
quadrature lengths the serving models price (:mod:`pdplan.workload.bins`, :mod:`pdplan.workload.quadrature`)."""
