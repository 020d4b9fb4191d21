"""The simulator's prefix caches: per instance, a block LRU in HBM, then each lower tier as its own LRU.

The closed forms (:mod:`pdplan.cache`) predict hit ratios from stack distances and characteristic times; this module
replays the caches block by block instead, with plain ``OrderedDict`` LRUs, so that ``pdplan simulate`` can check
them. It uses none of :mod:`pdplan.cache`.

**Domains.** A cache *domain* is one LRU over block ids with a capacity in blocks (an ``OrderedDict``, least recent
first). Each instance has a *chain* of domains, fastest first: its own HBM domain, then one domain per lower tier.
A lower tier's domain is the instance's own (``"instance"``: host DRAM or SSD split into per-instance shares, the
default, see :mod:`pdplan.sim.reuse_setup`), shared by the instances of a node (``"node"``: instances ``k·m … k·m +
m − 1`` with m instances per node share one domain of the node's capacity), or one domain for the whole deployment
(``"pool"``: a remote pool such as Mooncake Store, shared by every instance).

**Lookup** (:meth:`PrefixCaches.lookup`): a request's hit is the longest prefix of its blocks that are each held by
some domain of its instance's chain (prefix matching: vLLM hashes each block with its parent's hash, so a block
reuses only after the same prefix; docs/prefix_cache.md §2); each block counts for the first (fastest) domain that
holds it.

**Touch** (:meth:`PrefixCaches.touch`): blocks become the most recent, in order (the first block of a prompt ends up
the least recent of them, as in docs/prefix_cache.md §2):

* ``"exclusive"`` (TensorRT-LLM host offload, Mooncake Store; :mod:`pdplan.cache.tiers`): each block lives in one
  domain of the chain. A touched block moves into HBM, out of the lower domain that held it (a hit in a lower tier
  is *promoted*); HBM's least recent blocks beyond its capacity are *demoted* to the next domain (inserted as its
  most recent, oldest first), whose overflow goes one further; the last domain's overflow is dropped. For a private
  chain this is one LRU stack cut into bands of the tiers' capacities, which is how :mod:`pdplan.cache.tiers` reads
  it.
* ``"inclusive"`` (vLLM's offloading connector and LMCache, SGLang HiCache write-through): every domain of the chain
  is touched by every access (write-through on insert, refresh on a hit, a hit in a lower tier is copied back up);
  each evicts its own least recent blocks beyond its capacity, dropped there while a larger tier below keeps a copy.
  Each domain is then the LRU of its own capacity over the same accesses: nested capacities (a lower domain no
  larger than one above it holds only blocks that one holds too, and serves nothing).

A touch is one operation: its blocks are inserted or refreshed, then each domain's overflow is evicted (for a private
chain the result equals evicting block by block: the touched blocks are the most recent, so the overflow is the same
set of least recent blocks).

Not modelled: blocks in use by a running request are not pinned (an engine never evicts them; here they are the most
recent blocks, evicted only when a domain holds less than a request); no admission policy, no TTL, no lease.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Literal

from pdplan.cache.tiers import Inclusion
from pdplan.errors import SpecError

Scope = Literal["instance", "node", "pool"]
SCOPES: tuple[Scope, ...] = ("instance", "node", "pool")
INCLUSIONS: tuple[Inclusion, ...] = ("inclusive", "exclusive")


@dataclass(frozen=True, slots=True)
class TierDomain:
    """One lower tier as the simulator holds it: its name, its capacity in blocks per domain and who shares it."""

    name: str
    capacity_blocks: int
    """Blocks one domain holds: per instance (``"instance"``), per node (``"node"``) or for the pool (``"pool"``)."""
    scope: Scope = "instance"

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise SpecError(f"tier {self.name!r}: scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.capacity_blocks < 0:
            raise SpecError(f"tier {self.name!r}: capacity_blocks must be >= 0, got {self.capacity_blocks}")


class BlockLru:
    """One cache domain: an LRU of block ids (least recent first) holding at most ``capacity`` blocks."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def refresh(self, blocks: Sequence[int]) -> None:
        """Insert or refresh ``blocks`` in order (each becomes the most recent); no eviction."""
        held = self.blocks
        move = held.move_to_end
        for b in blocks:
            if b in held:
                move(b)
            else:
                held[b] = None

    def overflow(self) -> list[int]:
        """Evict and return the least recent blocks beyond the capacity, oldest first."""
        extra = len(self.blocks) - self.capacity
        if extra <= 0:
            return []
        pop = self.blocks.popitem
        return [pop(False)[0] for _ in range(extra)]

    def trim(self) -> None:
        """Evict the least recent blocks beyond the capacity (dropped)."""
        pop = self.blocks.popitem
        for _ in range(len(self.blocks) - self.capacity):
            pop(False)


class PrefixCaches:
    """The prefix caches of ``instances`` instances (module docstring): one chain of domains per instance."""

    def __init__(
        self,
        instances: int,
        hbm_blocks: int,
        tiers: Sequence[TierDomain] = (),
        inclusion: Inclusion = "exclusive",
        instances_per_node: int = 1,
    ) -> None:
        if instances < 1 or instances_per_node < 1:
            raise SpecError(f"instances and instances_per_node must be >= 1, got {instances}, {instances_per_node}")
        if hbm_blocks < 0:
            raise SpecError(f"hbm_blocks must be >= 0, got {hbm_blocks}")
        if inclusion not in INCLUSIONS:
            raise SpecError(f"inclusion must be one of {', '.join(INCLUSIONS)}, got {inclusion!r}")
        self.inclusive = inclusion == "inclusive"
        self.names = ("hbm", *(t.name for t in tiers))
        self.chains: list[list[BlockLru]] = [[BlockLru(hbm_blocks)] for _ in range(instances)]
        for tier in tiers:
            shared: dict[int, BlockLru] = {}
            for inst, chain in enumerate(self.chains):
                key = {"instance": inst, "node": inst // instances_per_node, "pool": 0}[tier.scope]
                chain.append(shared.setdefault(key, BlockLru(tier.capacity_blocks)))

    @property
    def levels(self) -> int:
        """Domains per chain: HBM plus the lower tiers."""
        return len(self.names)

    def lookup(self, instance: int, blocks: Sequence[int]) -> list[int]:
        """Blocks of the longest cached prefix of ``blocks`` on ``instance``, per level of its chain (HBM first).
        Changes nothing: :meth:`touch` the hit to promote it."""
        chain = [d.blocks for d in self.chains[instance]]
        counts = [0] * len(chain)
        hbm = chain[0]
        first = sum(1 for _ in takewhile(hbm.__contains__, blocks))  # the common case: all in HBM
        counts[0] = first
        if first == len(blocks) or len(chain) == 1:
            return counts
        for b in blocks[first:]:
            for level, held in enumerate(chain):
                if b in held:
                    counts[level] += 1
                    break
            else:
                break
        return counts

    def touch(self, instance: int, blocks: Sequence[int]) -> None:
        """Make ``blocks`` the most recent on ``instance``, in order (module docstring: exclusive or inclusive)."""
        chain = self.chains[instance]
        if self.inclusive or len(chain) == 1:
            for domain in chain:
                domain.refresh(blocks)
                domain.trim()
            return
        hbm, lower = chain[0].blocks, [d.blocks for d in chain[1:]]
        for b in blocks:
            if b in hbm:
                hbm.move_to_end(b)
                continue
            for held in lower:
                if b in held:
                    del held[b]
                    break
            hbm[b] = None
        victims = chain[0].overflow()
        for domain in chain[1:]:
            if not victims:
                break
            domain.refresh(victims)
            victims = domain.overflow()  # the last domain's overflow is dropped

    def held_blocks(self, instance: int) -> list[int]:
        """Blocks per level of ``instance``'s chain (for tests and diagnostics)."""
        return [len(d.blocks) for d in self.chains[instance]]
