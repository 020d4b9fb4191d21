"""Invariants of the KV data plane (pdplan.transfer.data_plane in pdplan.transfer.kv) over random inputs: the
transfer time grows with tokens, falls with the block size, and is never below bytes / bandwidth."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.transfer.data_plane import DataPlane
from pdplan.transfer.kv import kv_transfer
from pdplan.transfer.kv_inputs import KvShape, TransferConfig


@dataclass(frozen=True)
class Link:
    line_rate_bytes_per_s: float
    per_message_latency_s: float
    efficiency: float


links = st.builds(Link, st.floats(1e8, 1e12), st.floats(0.0, 1e-4), st.floats(0.05, 1.0))
shapes = st.builds(
    KvShape, st.floats(1e3, 3e6), st.integers(1, 128), st.integers(1, 64), st.floats(0.0, 1e8), st.sampled_from([1, 2])
)
planes = st.builds(
    DataPlane,
    backend=st.just("p"),
    split=st.sampled_from(["block", "layer", "buffer"]),
    block_tokens=st.sampled_from([1, 8, 16, 32, 64, 128]),
    per_descriptor_s=st.floats(0.0, 1e-5),
    per_transfer_s=st.floats(0.0, 1e-2),
    bandwidth_cap_bytes_per_s=st.one_of(st.none(), st.floats(1e8, 1e12)),
)
tps = st.sampled_from([1, 2, 4, 8])
RTOL = 1e-9


def _cfg(plane: DataPlane, granularity: str, tp_p: int, tp_d: int) -> TransferConfig:
    return TransferConfig(
        granularity=granularity,  # type: ignore[arg-type]
        prefill_tp=tp_p,
        decode_tp=tp_d,
        decode_hbm_bytes_per_s=3e12,
        data_plane=plane,
    )


@settings(max_examples=60, deadline=None)
@given(links, shapes, planes, tps, tps, st.sampled_from(["request", "layer"]), st.integers(1, 100_000))
def test_time_grows_with_tokens_and_never_beats_the_wire(
    link: Link, kv: KvShape, plane: DataPlane, tp_p: int, tp_d: int, granularity: str, tokens: int
) -> None:
    lengths = np.asarray([tokens, tokens + 1, 2 * tokens, 2 * tokens + 17], dtype=np.float64)
    cfg = _cfg(plane, granularity, tp_p, tp_d)
    res = kv_transfer(lengths, kv, link, cfg, prefill_time_s=lengths * 1e-5)
    assert np.all(np.diff(res.time_s) >= -RTOL * res.time_s[1:])
    assert np.all(res.time_s >= res.bytes / res.bandwidth_bytes_per_s * (1.0 - RTOL))
    assert np.all(res.exposed_s <= res.time_s * (1.0 + RTOL))


@settings(max_examples=60, deadline=None)
@given(links, shapes, planes, tps, tps, st.sampled_from(["request", "layer"]), st.integers(1, 100_000))
def test_time_falls_with_block_size(
    link: Link, kv: KvShape, plane: DataPlane, tp_p: int, tp_d: int, granularity: str, tokens: int
) -> None:
    times, exposed = [], []
    for block in (1, 8, 16, 32, 64, 128):
        p = DataPlane(
            plane.backend,
            "block",
            block,
            plane.per_descriptor_s,
            plane.per_transfer_s,
            plane.bandwidth_cap_bytes_per_s,
        )
        res = kv_transfer([float(tokens)], kv, link, _cfg(p, granularity, tp_p, tp_d), prefill_time_s=tokens * 1e-5)
        times.append(float(res.time_s[0]))
        exposed.append(float(res.exposed_s[0]))
    for series in (times, exposed):
        assert all(b <= a * (1.0 + RTOL) for a, b in itertools.pairwise(series))
