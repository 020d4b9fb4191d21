"""The prefill side of a PPD model priced at the hit tokens its placement leaves (docs/prefix_cache.md §11, issue
#24 item 6).

A PPD placement changes what a prefill-pool turn finds in its prefill cache (:mod:`pdplan.serving.ppd_hits`): the
prompt of its session's last prefill-pool turn, often older and shorter than the previous turn's prompt that plain
disaggregation priced its bin's hit classes at. :func:`placed_prices` prices each (prompt bin, class) row again at
new hit tokens ``[K, H]``, exactly as the xPyD model prices its cached prefill side
(:func:`pdplan.serving.disaggregated.build_disaggregated` with :func:`pdplan.serving.prefix_cache.point_prices`):

* each quadrature point l of bin k, class h, caches ``min(hit_kh, l − 1)`` tokens and computes the rest
  (:func:`pdplan.serving.roles.cached_prefill_perf`), with the exposed load of the lower tiers' part of the hit
  (:meth:`pdplan.serving.prefix_cache.CacheClasses.exposed_load_s`);
* the KV transfer of the whole prompt (its bytes do not depend on the hit) overlaps that prefill's time under
  layer-wise or chunked granularity (:func:`pdplan.transfer.kv.kv_transfer`): its prefill extra per point, its
  exposed time and slack per row move with it;
* the pool's latency and service per point are the prefill's plus that extra plus the load
  (:func:`pdplan.serving.prefill_pool.prefill_pool`, batch-1: PPD with batched prefill is refused);
* DualPath's storage read stage reads each point's hit (:func:`pdplan.serving.dual_path_setup.storage_read_stage`).

With the model's own hit tokens it returns the model's own prices (tests/unit/test_ppd_hits.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.errors import SpecError
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.serving.dual_path_setup import StorageReadStage
    from pdplan.transfer.kv_inputs import TransferConfig


@dataclass(frozen=True, slots=True)
class PlacedPrices:
    """The prefill side's prices per row (``[K·H]``) and per point (``[K·H, J]``) at the placed hit tokens."""

    point_latency_s: FloatArray
    point_service_s: FloatArray
    exposed_s: FloatArray
    point_exposed_s: FloatArray
    link_slack_s: FloatArray
    storage_read: StorageReadStage | None
    """Plain disaggregation's rows (``[K·H]``, no decode class) read at the placed hits; None: no DualPath stage."""


def placed_prices(model: Any, hit_tokens: FloatArray, cfg: TransferConfig) -> PlacedPrices:
    """The prices of ``model``'s (a plain :class:`~pdplan.serving.disaggregated.DisaggregatedModel` with a session
    cache) prefill rows with each (bin, class) holding ``hit_tokens`` ``[K, H]`` (module docstring), its KV transfer
    configured by ``cfg`` (:func:`pdplan.serving.disaggregated.transfer_config`, as the model was built)."""
    from pdplan.serving.dual_path_setup import storage_read_stage
    from pdplan.serving.prefix_cache import point_prices  # lazy: start-up (issue #27)
    from pdplan.serving.roles import cached_prefill_perf
    from pdplan.transfer.kv import kv_transfer
    from pdplan.transfer.kv_inputs import kv_shape_from_model

    res, classes = model.res, model.cache
    if classes is None or classes.requests is not None:
        raise SpecError("PPD prices a sessions workload's prefix-cache classes only", field="cache.turn_placement")
    hw = res.hardware.prefill
    hits = np.asarray(hit_tokens, dtype=np.float64)
    k, h = hits.shape
    kvb = res.model.kv_bytes_per_token(hw.precision.kv_bytes)
    points = np.repeat(res.input_points, h, axis=0)
    placed = dataclasses.replace(classes, hit_tokens=hits)
    priced = point_prices(hw, placed, points.reshape(k, h, -1), hits[:, :, None], kvb)
    load = priced.load_s.reshape(points.shape)
    tokens = np.repeat(res.lengths.input_tokens, h)
    base = cached_prefill_perf(hw, tokens, hits.ravel())
    kv = kv_shape_from_model(res.model, hw.precision.kv_bytes)
    link = res.hardware.link
    xfer = kv_transfer(tokens, kv, link, cfg, prefill_time_s=base.latency_s + load.mean(axis=1))
    point_xfer = kv_transfer(points.ravel(), kv, link, cfg, prefill_time_s=priced.perf.latency_s + load.ravel())
    extra = np.asarray(point_xfer.prefill_extra_s).reshape(points.shape) + load
    return PlacedPrices(
        point_latency_s=np.asarray(priced.perf.latency_s.reshape(points.shape) + extra, dtype=np.float64),
        point_service_s=np.asarray(priced.perf.service_s.reshape(points.shape) + extra, dtype=np.float64),
        exposed_s=np.asarray(xfer.exposed_s, dtype=np.float64),
        point_exposed_s=np.asarray(point_xfer.exposed_s, dtype=np.float64).reshape(points.shape),
        link_slack_s=np.asarray(np.broadcast_to(xfer.slack_s, tokens.shape), dtype=np.float64),
        storage_read=storage_read_stage(res, placed, priced.cached_tokens.reshape(points.shape), model.bin_prob),
    )
