"""Offline fitters of the shipped kernel tables (``pdplan/data/kernel_tables/``, ``moe_cutlass/``, ``moe_w4a16/``)
on NVIDIA AIConfigurator's kernel measurements, and their accuracy per cell (:mod:`fitting.accuracy`).

Not part of the pdplan package: nothing at run time imports them. The scripts in ``benchmarks/`` that fit and score
the tables (``fit_kernel_tables.py``, ``fit_moe_tables.py``, ``kernel_accuracy.py``, ...) put ``tools/`` on
``sys.path``; pytest does too (``pythonpath`` in ``pyproject.toml``). What ``pdplan calibrate`` runs stays in
:mod:`pdplan.calibrate`.
"""
