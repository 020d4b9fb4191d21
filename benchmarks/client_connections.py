"""A benchmark client that holds fewer HTTP connections than it has clients: the C = 512 vLLM gpt-oss rows.

The nine vLLM gpt-oss-120b rows of ``aiconfigurator-silicon/h100_sxm.csv`` run at C = 512 (vLLM 0.11.2 and an
unversioned image, measured 2025-12-05/08) report TTFT 20-462 s with TPOT 3.6-27 ms. By Little's law on the decode
phase alone (no pdplan model involved), a closed loop of C clients whose requests take TTFT + (OSL − 1)·TPOT has

    N_in_service = C · (OSL − 1)·TPOT / (TTFT + (OSL − 1)·TPOT)

requests decoding at any time: 96-106 on all nine rows, at TP 2, 4 and 8, for 1024/1024, 1024/8192 and 8192/1024
alike. A cap that does not move with TP (8x the KV room from TP 2 to TP 8), ISL or OSL is not the engine's KV pool
or its max_num_seqs (1,024 on H100 in both versions, ``vllm-0.18.yaml`` limits); it is the client's: aiohttp's
``TCPConnector`` defaults to ``limit=100`` connections (aiohttp ``connector.py``), and a client session built without
its own connector holds at most 100 requests in flight, the rest waiting for a connection inside the timed request
(vLLM issue #7241: a server capped at 100 running requests, traced by a user to the client's aiohttp
TCPConnector limit; gpustack PR #2324: TTFT degrading above 100 concurrent requests, the aiohttp connector limit;
vllm-project/production-stack PR #767, 2025-12-11: its router proxied at most 100 concurrent requests, the same
default). The CSV does not name the client
or router of these runs; the 100 is aiohttp's documented default, not fitted (the rows give 96-106).

Model: the server sees a closed loop of N = min(C, 100) clients that is never short of work; each connection's cycle
is R_N = TTFT_N + (OSL − 1)·TPOT_N, the throughput X = N / R_N, and a client's whole request takes C / X = (C/N)·R_N,
so the measured TTFT is TTFT_N + (C/N − 1)·R_N (the wait for a connection) and TPOT is TPOT_N. Applied to the vLLM rows
measured in 2025 (the only vLLM rows with C > 100); the vLLM 0.18 and TensorRT-LLM rows are left as they are (the
TensorRT-LLM gpt-oss rows at C = 160-384 give N = C·0.97 by the same formula: no cap).

Caveat: at N ≈ 100 three of the nine rows measure a TPOT below the HBM floor of such a step (docs/accuracy_engines.md,
MoE findings), so the rows are not fully self-consistent; the cap rests on the TTFT/TPOT ratio being the same at every
TP, ISL and OSL, and on the value being aiohttp's default rather than a fit.
"""

from __future__ import annotations

import re
from typing import Any

AIOHTTP_DEFAULT_CONNECTIONS = 100
"""aiohttp ``TCPConnector(limit=100)``: the default connection limit of a ``ClientSession`` (module docstring)."""


def connections_of(row: dict[str, Any], source: str) -> int | None:
    """The client's connection limit for one CSV row (``source``: its ``silicon_data_source``), or None if unbounded:
    the vLLM rows measured in 2025 (module docstring)."""
    measured = re.search(r"measured=(\d{4})-", source)
    if row["engine"] == "vllm" and measured is not None and int(measured.group(1)) <= 2025:
        return AIOHTTP_DEFAULT_CONNECTIONS
    return None


def in_service_from_measured(concurrency: int, osl: int, ttft_s: float, tpot_s: float) -> float:
    """Little's law on the decode phase: requests decoding at once in a closed loop of ``concurrency`` clients."""
    decode_s = (osl - 1) * tpot_s
    return concurrency * decode_s / (ttft_s + decode_s)


def client_ttft_s(concurrency: int, connections: int, osl: int, ttft_s: float, tpot_s: float) -> float:
    """Client-measured TTFT when ``connections`` < ``concurrency``: the server's TTFT_N (``ttft_s``, priced at N
    clients) plus the wait for a connection, (C/N − 1)·R_N with R_N = TTFT_N + (OSL − 1)·TPOT_N."""
    if connections >= concurrency:
        return ttft_s
    cycle_s = ttft_s + (osl - 1) * tpot_s
    return ttft_s + (concurrency / connections - 1.0) * cycle_s
