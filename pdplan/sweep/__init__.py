"""``pdplan sweep``: many ``optimize`` (or ``evaluate``) runs over a grid of scenario overrides, on a process pool or
a Ray cluster, into one tidy table (docs/sweep.md).

The grid file's schema is :mod:`pdplan.specs.sweep`; :mod:`pdplan.sweep.job` reads it into a :class:`SweepJob`,
:mod:`pdplan.sweep.point` runs one point through the library, :mod:`pdplan.sweep.executors` fans the points out,
:mod:`pdplan.sweep.store` keeps the append-only JSONL (resume) and writes the final CSV, and
:mod:`pdplan.sweep.summary` the Markdown summary; :mod:`pdplan.sweep.run` ties them together.
"""
