"""What a chunked screen keeps of its candidates (issue #26: peak memory bounded whatever the search space).

The screen (:func:`pdplan.search.screen.screen_disaggregated`) yields its candidates in tiles; they are gathered into
chunks of at most :data:`pdplan.specs.ceilings.SCREEN_CHUNK_CANDIDATES` and each chunk is reduced, with the rows kept
so far, to the rows the later stages read. Every stage after the screen reads either an extreme, a first row or a
count, so it gives the same answer on the kept rows as on all of them (ties broken by the enumeration ``index``,
which the kept rows keep, in order), with the counts tallied as the chunks pass:

* the ranking and exact re-evaluation (:func:`pdplan.search.optimize._refine`) walk the ranked order one distinct
  deployment at a time and try at most ``best`` of them: the best-ranked row of each of the ``best`` best distinct
  deployments is kept (a deployment's best row in the union is the best of its best rows in the parts);
* the Pareto front (:func:`pdplan.search.select.pareto_front` over the feasible rows): every point of the front
  (a point on the front of the union is on the front of its own part);
* the why-not table (:func:`pdplan.search.planning.why_not`), per prefill and decode instance type: its first row,
  its first row meeting the SLO, and among its feasible rows the best goodput per GPU, the lowest $/h and the best
  goodput and output tokens/s per $/h; the most common binding constraint of its rows is tallied (:class:`Tally`);
* the exit-3 paths (:func:`pdplan.search.pool.infeasible`, :func:`pdplan.search.closest.with_closest`,
  :func:`pdplan.search.planning.unpriced_infeasible`): the first row meeting the SLO (and of those, the first with a
  price), the most goodput, the fewest GPUs meeting the SLO, and the first row of each (prefill, decode) option pair;
* the search statistics: the number of feasible candidates is tallied.

Feasibility and ranking are read under the search's restriction (``--xpyd`` / ``--colocated``:
:func:`pdplan.search.pool.restricted`), as the later stages read them.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pdplan.search.screen import Candidates
from pdplan.search.select import Metrics, feasible_mask, needs_price, pareto_front, rank
from pdplan.search.tables import DecodeTable, PrefillBase
from pdplan.serving import RoleHardware
from pdplan.types import FloatArray, IntArray


@dataclass(frozen=True)
class Keep:
    """What the later stages ask of the screen: the objective and targets they rank by (:class:`pdplan.search.space.
    Space`), how many distinct deployments they may try exactly (``best``) and the restriction (``xpyd``: only these
    instance counts rank; ``colocated_only``: no disaggregated candidate ranks)."""

    objective: str
    budget_gpus: int | None
    rate_rps: float | None
    budget_usd_per_hour: float | None
    best: int
    xpyd: tuple[int, int] | None = None
    colocated_only: bool = False


@dataclass(frozen=True)
class Groups:
    """Per option (index into the prefill or decode option list): the why-not group (its instance type's label) and
    the deployment key (:func:`pdplan.search.optimize._distinct`: role shape, and the prefill option's cache)."""

    prefill_label: IntArray
    decode_label: IntArray
    prefill_key: IntArray
    decode_key: IntArray
    labels: tuple[tuple[str, ...], tuple[str, ...]]
    """(prefill labels, decode labels) by group id."""
    max_instances: int

    @classmethod
    def of(cls, bases: list[PrefillBase], tables: list[DecodeTable], max_instances: int) -> Groups:
        """The groups and keys of the screen's option lists."""
        p_labels = _ids(b.hw.label for b in bases)
        d_labels = _ids(t.hw.label for t in tables)
        p_keys = _ids((_shape(b.hw), b.cache) for b in bases)
        d_keys = _ids(_shape(t.hw) for t in tables)
        return cls(
            np.array([p_labels[b.hw.label] for b in bases], dtype=np.intp),
            np.array([d_labels[t.hw.label] for t in tables], dtype=np.intp),
            np.array([p_keys[(_shape(b.hw), b.cache)] for b in bases], dtype=np.intp),
            np.array([d_keys[_shape(t.hw)] for t in tables], dtype=np.intp),
            (tuple(p_labels), tuple(d_labels)),
            max_instances,
        )


def _ids(values: Iterable[Hashable]) -> dict[Any, int]:
    """Each distinct value's id, in order of first appearance."""
    out: dict[Any, int] = {}
    for v in values:
        out.setdefault(v, len(out))
    return out


def _shape(hw: RoleHardware) -> tuple[object, ...]:
    """What a deployment's role names of its instance type (:class:`pdplan.serving.Role` without the count)."""
    return (hw.gpu.name, hw.tp, hw.pp, hw.dp, hw.ep, hw.expert_gather)


@dataclass
class Tally:
    """Counts over every screened candidate: how many are feasible, and the binding constraints (overall, and per
    (role, instance-type label): word -> (count, enumeration index of its first row))."""

    screened: int = 0
    feasible: int = 0
    binding: Counter[str] = field(default_factory=Counter)
    by_type: dict[tuple[str, str], dict[str, tuple[int, int]]] = field(default_factory=dict)

    def most_binding(self, role: str, label: str) -> str:
        """The most common binding constraint of instance type ``label`` in ``role`` (ties: the first met, as
        :meth:`collections.Counter.most_common` breaks them)."""
        words = self.by_type[(role, label)]
        return min(words, key=lambda w: (-words[w][0], words[w][1]))


@dataclass(frozen=True)
class Rows:
    """Screened candidates and their objective numbers, in enumeration order."""

    cands: Candidates
    metrics: Metrics

    @property
    def size(self) -> int:
        return self.cands.size


def kept_rows(
    tiles: Iterator[Candidates],
    metrics_of: Callable[[Candidates], Metrics],
    keep: Keep,
    groups: Groups,
    chunk: int,
    progress: Callable[[int, float], None],
) -> tuple[Rows, Tally]:
    """The rows of ``tiles`` the later stages read (module docstring) and the tally of all of them; ``progress``
    hears the candidates screened so far and the seconds spent, after each chunk."""
    tally, started = Tally(), time.perf_counter()
    kept: Rows | None = None
    buffer: list[Candidates] = []
    held = 0
    for tile in tiles:
        if buffer and held + tile.size > chunk:
            kept = _reduce(kept, buffer, metrics_of, keep, groups, tally)
            buffer, held = [], 0
            progress(tally.screened, time.perf_counter() - started)
        buffer.append(tile)
        held += tile.size
    if buffer:
        kept = _reduce(kept, buffer, metrics_of, keep, groups, tally)
    if kept is None:
        raise ValueError("the screen yielded no candidate")  # build_pool screens only a non-empty space
    return kept, tally


def _reduce(
    kept: Rows | None,
    buffer: list[Candidates],
    metrics_of: Callable[[Candidates], Metrics],
    keep: Keep,
    groups: Groups,
    tally: Tally,
) -> Rows:
    """The rows kept from ``kept`` and one chunk, the chunk tallied."""
    cands = _concat_candidates(buffer)
    chunk = _sorted(Rows(cands, metrics_of(cands)))
    _tally(chunk, keep, groups, tally)
    union = chunk if kept is None else _sorted(_concat(kept, chunk))
    return _take(union, np.flatnonzero(_selected(union, keep, groups)))


def _restricted(rows: Rows, keep: Keep) -> Metrics:
    """The metrics as the later stages rank them: goodput zero outside the restriction."""
    m, c = rows.metrics, rows.cands
    if keep.colocated_only:
        good = np.zeros_like(m.goodput_rps)
    elif keep.xpyd is not None:
        good = np.where((c.x == keep.xpyd[0]) & (c.y == keep.xpyd[1]), m.goodput_rps, 0.0)
    else:
        return m
    return dataclasses.replace(m, goodput_rps=good)


def _feasible(m: Metrics, keep: Keep) -> npt.NDArray[np.bool_]:
    return feasible_mask(
        m,
        budget_gpus=keep.budget_gpus,
        rate_rps=keep.rate_rps,
        budget_usd_per_hour=keep.budget_usd_per_hour,
        priced=needs_price(keep.objective, keep.budget_usd_per_hour),
    )


def _tally(rows: Rows, keep: Keep, groups: Groups, tally: Tally) -> None:
    """Add one chunk's feasible count and binding constraints to ``tally``."""
    c = rows.cands
    tally.screened += c.size
    tally.feasible += int(_feasible(_restricted(rows, keep), keep).sum())
    words, word_id = _factorised(c.binding)
    for role, gid, labels in (
        ("prefill", groups.prefill_label[c.prefill], groups.labels[0]),
        ("decode", groups.decode_label[c.decode], groups.labels[1]),
    ):
        pairs, first, counts = np.unique(gid * words.size + word_id, return_index=True, return_counts=True)
        for pair, at, n in zip(pairs.tolist(), first.tolist(), counts.tolist(), strict=True):
            g, w = divmod(pair, words.size)
            seen = tally.by_type.setdefault((role, labels[g]), {})
            count, where = seen.get(str(words[w]), (0, int(c.index[at])))
            seen[str(words[w])] = (count + n, min(where, int(c.index[at])))
    for w, n in zip(words.tolist(), np.bincount(word_id, minlength=words.size).tolist(), strict=True):
        tally.binding[str(w)] += n


def _factorised(labels: npt.NDArray[np.object_]) -> tuple[npt.NDArray[np.str_], IntArray]:
    """``np.unique(labels.astype(str), return_inverse=True)``: the distinct words (as ``str``, sorted) and each
    label's index among them, by one dict lookup per label instead of a sort of the strings (a screen chunk holds a
    handful of distinct binding words over thousands of rows: 8,192 rows, 3.4 ms instead of 10.7)."""
    index: dict[str, int] = {}
    first = np.fromiter((index.setdefault(str(w), len(index)) for w in labels.tolist()), np.intp, labels.size)
    words = np.array(sorted(index), dtype=str)
    rank = np.searchsorted(words, np.array(list(index), dtype=str))
    return words, np.asarray(rank[first], dtype=np.intp)


def _selected(rows: Rows, keep: Keep, groups: Groups) -> npt.NDArray[np.bool_]:
    """Which of ``rows`` (in enumeration order) the later stages can read (module docstring)."""
    c, m = rows.cands, _restricted(rows, keep)
    out = np.zeros(c.size, dtype=bool)
    order = rank(
        m,
        objective=keep.objective,
        budget_gpus=keep.budget_gpus,
        rate_rps=keep.rate_rps,
        budget_usd_per_hour=keep.budget_usd_per_hour,
    )
    out[_best_distinct(rows, order, groups, keep.best)] = True
    per_gpu = m.goodput_rps[order] / m.num_gpus[order]
    out[order[pareto_front(per_gpu, 1.0 / np.maximum(c.tau_s[order], 1e-12), limit=order.size)]] = True
    out[np.concatenate(_witnesses(rows, m, _feasible(m, keep), groups, keep))] = True
    return out


def _best_distinct(rows: Rows, order: IntArray, groups: Groups, best: int) -> IntArray:
    """The best-ranked row of each of the ``best`` best-ranked distinct deployments."""
    c, n = rows.cands, groups.max_instances
    pair = groups.prefill_key[c.prefill].astype(np.int64) * (int(groups.decode_key.max()) + 1) + groups.decode_key[
        c.decode
    ].astype(np.int64)
    key = (pair * n + (c.x - 1)) * n + (c.y - 1)
    _, first = np.unique(key[order], return_index=True)
    return np.asarray(order[np.sort(first)[:best]], dtype=np.intp)


def _witnesses(rows: Rows, m: Metrics, ok: npt.NDArray[np.bool_], groups: Groups, keep: Keep) -> list[IntArray]:
    """The rows the why-not table and the exit-3 paths read (module docstring)."""
    c = rows.cands
    good = m.goodput_rps > 0.0
    cost = m.cost_usd_per_hour
    with np.errstate(divide="ignore", invalid="ignore"):
        priced = ok & np.isfinite(cost) & (cost > 0)
        per_dollar, tokens_per_dollar = m.goodput_rps / cost, m.output_tokens_per_s / cost
    every = np.ones(c.size, dtype=bool)
    pair = _Grouped.of(c.prefill.astype(np.int64) * (int(c.decode.max()) + 1) + c.decode)
    out = [pair.first(every)]
    for labels in (groups.prefill_label[c.prefill], groups.decode_label[c.decode]):
        group = _Grouped.of(labels)
        out += [
            group.first(every),
            group.first(good),
            group.best(m.goodput_rps / m.num_gpus, ok),
            group.best(-cost, priced),
            group.best(per_dollar, priced),
            group.best(tokens_per_dollar, priced),
        ]
    one = _Grouped.of(np.zeros(c.size, dtype=np.intp))
    within = m.num_gpus <= (keep.budget_gpus or np.inf)
    out += [
        one.first(good),
        one.first(good & np.isfinite(cost)),
        one.best(np.where(within, m.goodput_rps, -1.0), every),
        one.best(-m.num_gpus, good),
    ]
    return out


def _first_best(group: npt.NDArray[np.integer], value: FloatArray, mask: npt.NDArray[np.bool_]) -> IntArray:
    """Per group, the first row (in row order) with the largest ``value`` among the rows ``mask`` admits (the row
    :func:`numpy.argmax` finds over that group's rows); :meth:`_Grouped.best`."""
    return _Grouped.of(group).best(value, mask)


@dataclass(frozen=True)
class _Grouped:
    """Rows sorted by group label once (stably: row order within a group) for several :meth:`best` calls."""

    order: IntArray
    """Row indices, by group then row."""
    label: npt.NDArray[np.integer]
    """The group label of each row of ``order``."""

    @classmethod
    def of(cls, group: npt.NDArray[np.integer]) -> _Grouped:
        """``group`` sorted; labels that fit int16 sort as int16 (NumPy's stable sort is then a radix sort, about
        10x faster than on int64; the same order)."""
        small = group.size > 0 and int(group.min()) >= -(2**15) and int(group.max()) < 2**15
        order = np.argsort(group.astype(np.int16) if small else group, kind="stable")
        return cls(np.asarray(order, dtype=np.intp), group[order])

    def _admitted(self, mask: npt.NDArray[np.bool_]) -> tuple[IntArray, IntArray]:
        """(the rows ``mask`` admits, by group then row; where each group's run of them starts)."""
        keep = mask[self.order]
        at, label = self.order[keep], self.label[keep]
        starts = np.flatnonzero(np.concatenate(([True], label[1:] != label[:-1]))) if at.size else at
        return at, np.asarray(starts, dtype=np.intp)

    def first(self, mask: npt.NDArray[np.bool_]) -> IntArray:
        """Per group, the first row ``mask`` admits (:meth:`best` of a constant value)."""
        at, starts = self._admitted(mask)
        return np.asarray(at[starts], dtype=np.intp)

    def best(self, value: FloatArray, mask: npt.NDArray[np.bool_]) -> IntArray:
        """Per group (ascending label), the first row with the largest ``value`` among the rows ``mask`` admits; NaN
        ranks below every number (a group of NaNs only gives its first row), -0.0 ties with 0.0 (the order of
        ``np.lexsort((row, -value, group))``, whose first row per group this is)."""
        at, starts = self._admitted(mask)
        if not at.size:
            return at
        v = value[at]
        top = np.repeat(np.fmax.reduceat(v, starts), np.diff(np.append(starts, at.size)))  # NaN: the group is all NaN
        hit = np.flatnonzero((v == top) | np.isnan(top))
        run = np.searchsorted(starts, hit, side="right")  # 1 + the group of each hit
        return np.asarray(at[hit[np.concatenate(([True], run[1:] != run[:-1]))]], dtype=np.intp)


def _concat_candidates(parts: list[Candidates]) -> Candidates:
    if len(parts) == 1:
        return parts[0]
    return Candidates(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Candidates)))


def _concat(a: Rows, b: Rows) -> Rows:
    return Rows(
        _concat_candidates([a.cands, b.cands]),
        Metrics(*(np.concatenate([getattr(a.metrics, f.name), getattr(b.metrics, f.name)]) for f in _METRIC_FIELDS)),
    )


def _take(rows: Rows, at: IntArray) -> Rows:
    return Rows(
        Candidates(*(getattr(rows.cands, f.name)[at] for f in dataclasses.fields(Candidates))),
        Metrics(*(getattr(rows.metrics, f.name)[at] for f in _METRIC_FIELDS)),
    )


def _sorted(rows: Rows) -> Rows:
    """``rows`` in enumeration order (tiles arrive block by block, a block's tiles row range by row range)."""
    index = rows.cands.index
    if index.size < 2 or bool((index[1:] > index[:-1]).all()):
        return rows
    return _take(rows, np.argsort(index, kind="stable"))


_METRIC_FIELDS = dataclasses.fields(Metrics)
