"""Ceilings on the counts a user can type (issue #26: every count has a documented ceiling, so that no input can make
pdplan allocate without bound or loop for hours). Each is far above any deployment or benchmark in use; the reason
is given beside it. A value above its ceiling is bad input (exit 2), never clipped."""

from __future__ import annotations

MAX_INSTANCES_PER_ROLE = 100_000
"""Instances of one role (``count``, ``--xpyd``, ``--colocated``). The largest GPU clusters announced by 2026 hold
of the order of 10^5 GPUs (xAI Colossus, 200k), so 10^5 instances of even one GPU each is beyond any real pool; the
M/M/c and Erlang recursions cost O(instances) per evaluation."""

MAX_PARALLEL_DEGREE = 1_024
"""Each of TP, PP, DP and EP. The largest scale-up domain shipped or announced (NVL576) is under 1,024 GPUs; a model's
head and layer counts bound TP and PP far below that in practice (checked separately where they are known)."""

MAX_CONCURRENCY = 1_000_000
"""Closed-loop clients (``--concurrency``): the closed loop keeps arrays of C + 1 states (8 MB at the ceiling), and
benchmark tools run at most a few thousand."""

MAX_REQUESTS = 5_000_000
"""Requests of one closed-loop or simulated run (``--requests``): the simulator keeps a few dozen bytes per request
and event (about 1 GB at the ceiling); benchmark tools run 10^2–10^4."""

MAX_SCREENED_CANDIDATES = 1_000_000_000
"""Disaggregated candidates one ``optimize`` screens (option pairs × routings × ``max_instances``²): a bound on time,
not memory (the screen runs in chunks of :data:`SCREEN_CHUNK_CANDIDATES`, so its memory does not grow with the
space). Measured 2026-12-06 on 2 shared cores: about 240,000 candidates a CPU-second (``pdplan optimize
examples/default.yaml --max-instances 480``, 4,148,640 candidates, 19 s CPU against 1.7 s at its default 4,656), so
the ceiling is about 70 minutes of screening, with a progress line giving the count and the time left; 10^9 is far
above any deployment's space."""

SCREEN_CHUNK_CANDIDATES = 2**14
"""Candidates the optimiser's screen holds at once (:mod:`pdplan.search.keep`). Its largest arrays are [candidates,
rate grid] float64 (:data:`pdplan.search.screen.GRID_POINTS` = 128 points): 2^14 × 128 × 8 B = 16 MiB each, and
:func:`pdplan.search.screen.screen_pair` holds about four at once (the joint attainment, its TTFT/TPOT bound, the
running minimum and the comparison), about 64 MiB, besides about 120 B a candidate of screened values and metrics
(2 MiB a chunk). 16 MiB stays under the 32 MiB below which glibc serves blocks from freed heap memory
(:mod:`pdplan.cli.allocator`): at 2^16 each 64 MiB array was mapped afresh and page-faulted in, 38 % of the 72-million
search's CPU in system time. Measured 2026-12-06 on the default scenario at ``--max-instances`` 256 (1,179,648
candidates): 2^16 a chunk, 8.5 s CPU (1.9 s system) and 385 MiB peak RSS; 2^14, 6.4 s (0.1 s) and 176 MiB; 2^13,
7.2 s and 146 MiB. Smaller chunks cost time (each re-ranks the rows kept so far), never accuracy: the report is the
same as one unchunked screen's."""
