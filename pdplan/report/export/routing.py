"""The request routing a plan was priced with, written in each target's terms, and a warning wherever the target
cannot express it.

pdplan prices the prefill pool of an xPyD plan with its ``routing`` (random | round-robin | least-work | least-loaded
| power-of-two: docs/queueing.md §1.3; the plan's ``priced.routing.prefill``), and the decode pool and colocated
instances as a random split of the arrivals (``priced.routing.decode`` / ``.colocated``;
pdplan/serving/disaggregated.py, colocated.py). Which policies each target's router runs, and what it is told for a
policy it lacks, is data (``routers`` in pdplan/data/export/targets.yaml, each entry with its source):

* **vLLM proxy** (vllm-project/vllm ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``): it cycles
  through its prefiller and decoder clients in turn (round-robin) and has no policy option. A colocated plan runs
  behind vLLM's data-parallel balancer where it fits one node as priced (:mod:`pdplan.report.export.vllm_dp`: the
  engine with the fewest ``4 · waiting + running``), else behind none (vLLM ships none for separate servers).
* **SGLang router** (sglang-router 0.3.2 ``sglang_router/router_args.py``): ``--policy``, ``--prefill-policy`` and
  ``--decode-policy`` take ``random``, ``round_robin``, ``power_of_two`` (the less loaded of two random workers),
  ``cache_aware`` (the default), ``bucket`` and ``manual``. random, round-robin and power-of-two are written as
  priced; least-work and least-loaded as ``power_of_two``, the nearest load-aware choice, with a warning. Its
  ``power_of_two`` compares the token loads it polls from the workers (every ``--worker-load-check-interval`` s),
  not the in-flight counts pdplan's power-of-two prices, so a plan priced with it gets a warning too.
* **Dynamo frontend** (ai-dynamo 1.2.1 wheel ``dynamo/common/configuration/groups/router_args.py``:
  ``--router-mode`` ``round-robin`` (the default), ``random``, ``power-of-two``, ``kv``, ``direct``,
  ``least-loaded``, ``device-aware-weighted``; ``dynamo/frontend/main.py`` maps each to the runtime's
  ``RouterMode``); it routes to every worker of the graph, so a colocated plan's aggregated workers need no other
  balancer (``examples/backends/vllm/deploy/agg.yaml``: a Frontend and one worker service). random, round-robin,
  power-of-two and least-loaded are written as priced (``least-loaded`` routes to the fewest in-flight requests, the
  rule pdplan's least-loaded prices: :mod:`pdplan.queueing.jsq`). Least-work is written as ``least-loaded``, the
  nearest, with a warning: it counts requests, not the prefill work left that least-work prices. In disaggregated
  prefill mode both count-based modes "skip bootstrap optimization and fall back to the synchronous prefill path"
  (the flag's help): that warning says so, and for a plan priced with least-loaded or power-of-two the routing line.

A plan priced with prefix caching and ``affinity`` routing (its ``cache``: a prefix's requests stay on the instance
that holds it) needs a router that keeps it: the SGLang router's ``cache_aware`` policy for the caching pool
(the prefill pool, or the colocated instances; it routes by prefix match and falls back to the shortest queue when the
load is imbalanced: router_args.py ``--cache-threshold``, ``--balance-abs-threshold``), and Dynamo's KV router
(``--router-mode kv``: it scores workers by the prefix blocks they already hold). vLLM's has none: a warning
(:func:`pdplan.report.export.cache.cache_warnings`).

A PrfaaS plan (arXiv 2604.15039) sends each request whose prompt is longer than its threshold to the remote prefill
cluster and the rest to the local one. No router these exports write routes by a fixed prompt length: vLLM's toy
proxy round-robins; sglang-router 0.3.2's ``bucket`` prefill policy moves its length boundaries with the load
(``engines.sglang.sources.prfaas_routing`` in pdplan/data/export/targets.yaml); Dynamo 1.2.1's frontend has no
length rule, and its global router (``python -m dynamo.global_router``, prefill pools chosen by input length) needs
each pool in its own Dynamo namespace with a local router, which a single graph does not give. The scripts therefore
run two fronts, one over each prefill cluster (both decoding on the local decode pool), and the manifest both
clusters' workers; :func:`prfaas_warnings` names, in one line, the length rule the operator must set by hand.
"""

from __future__ import annotations

from pdplan.errors import SpecError
from pdplan.io.export_data import export_targets
from pdplan.report.export.cache import cache_affinity, cache_role
from pdplan.report.export.common import Chosen, ExportContext
from pdplan.report.export.vllm_dp import BALANCER, vllm_dp_front
from pdplan.specs.export import RouterData

SEARCH_HINT = "search with `routing: [{0}]` in the scenario's search block for numbers this router meets"
COUNT_MODES = ("least-loaded", "power-of-two")
"""Dynamo modes that skip the bootstrap overlap in disaggregated prefill mode (``sources.bootstrap``)."""


def router(target: str) -> RouterData:
    """The ``routers`` entry of ``target`` (``vllm``, ``sglang``, ``dynamo``) in targets.yaml."""
    routers = {str(name): data for name, data in export_targets().routers.items()}
    if target not in routers:
        raise SpecError(f"no router data for target {target!r} (routers in targets.yaml)")
    return routers[target]


def router_value(target: str, policy: str) -> str:
    """What ``target``'s router is told for a priced ``policy``: its own value where it runs the policy, else the
    nearest (module docstring); SpecError where the data names neither."""
    data = router(target)
    known = {str(name): value for name, value in (*data.nearest.items(), *data.runs.items())}
    value = known.get(policy)
    if value is None:
        raise SpecError(f"{data.name} has no routing policy for {policy!r} (routers.{target} in targets.yaml)")
    return value


def priced_routing(chosen: Chosen) -> dict[str, str | None]:
    """Each pool's priced routing: ``priced.routing``, else the plan's ``routing`` for prefill (documents before
    ``priced``; None where it is not recorded either) and a random split elsewhere (what pdplan prices: module
    docstring)."""
    plan = chosen.plan
    if plan.priced is not None and plan.priced.routing:
        return dict(plan.priced.routing)
    if plan.mode == "colocated":
        return {"colocated": "random"}
    return {"prefill": plan.routing, "decode": "random"}


def _front_pool(chosen: Chosen) -> tuple[str, str | None]:
    """(pool, priced policy) of the pool whose routing sets the plan's TTFT: prefill, or the colocated pool."""
    pool = "colocated" if chosen.plan.mode == "colocated" else "prefill"
    return pool, priced_routing(chosen).get(pool)


def routing_warnings(chosen: Chosen, target: str) -> list[str]:
    """A warning where ``target`` (``vllm``, ``sglang``, ``dynamo``) cannot route as the plan was priced."""
    pool, policy = _front_pool(chosen)
    if policy is None:
        return [f"the plan document records no {pool} routing policy: the router's default applies"]
    if target == "vllm" and chosen.plan.mode == "disaggregated" and policy not in router("vllm").runs:
        return [
            f"the plan was priced with {policy} {pool} routing, but vLLM's toy proxy round-robins requests over the "
            f"prefillers (it has no policy option), so its TTFT may differ from the plan's: "
            + SEARCH_HINT.format("round-robin")
        ]
    if target in ("sglang", "dynamo") and cache_affinity(chosen):
        return []  # the cache-aware router replaces the priced policy (module docstring)
    if target == "sglang" and policy in router("sglang").nearest:
        return [
            f"the plan was priced with {policy} {pool} routing; the SGLang router has no {policy} policy, so "
            f"--prefill-policy {router_value('sglang', policy)} (the less loaded of two random workers) is written, "
            "the nearest: its TTFT tail may exceed the plan's; " + SEARCH_HINT.format("random")
        ]
    if target == "sglang" and policy == "power-of-two":
        return [
            f"the plan was priced with power-of-two {pool} routing on current in-flight request counts; the SGLang "
            "router's power_of_two compares the token loads it polls from the workers every "
            "--worker-load-check-interval s (10 by default) when it has them, a staler signal, so its TTFT tail may "
            "exceed the plan's"
        ]
    if target == "dynamo" and policy in router("dynamo").nearest:
        return [
            f"the plan was priced with {policy} {pool} routing; Dynamo's frontend has no {policy} mode, so "
            f"--router-mode {router_value('dynamo', policy)} is written, the nearest: it sends each request to the "
            "worker with the fewest active requests, not the least prefill work left (a short prompt can wait behind "
            "a long one), and waits for each prefill before the decode (no bootstrap overlap), so its TTFT tail may "
            "exceed the plan's"
        ]
    return []


def routing_line(chosen: Chosen, target: str, ctx: ExportContext | None = None) -> str:
    """One header line: what the plan priced and what the file's router does (for a colocated vLLM plan, whether
    vLLM's data-parallel front serves it: :mod:`pdplan.report.export.vllm_dp`, which needs ``ctx``)."""
    pool, policy = _front_pool(chosen)
    priced = "not recorded" if policy is None else f"priced with {policy} {pool} routing"
    if cache_affinity(chosen):
        priced += f" and prefix affinity on the {cache_role(chosen)} pool (cache.routing affinity)"
    if target == "vllm":
        does = (
            "vLLM's toy proxy round-robins over prefillers and decoders"
            if chosen.plan.mode == "disaggregated"
            else _vllm_colocated_front(chosen, ctx)
        )
    elif target == "sglang":
        does = f"the SGLang router runs {sglang_policies(chosen) or 'its default policy'}"
    elif chosen.plan.mode == "colocated":
        workers = chosen.plan.roles()[0][1].count
        mode = dynamo_router_mode(chosen) or "its default"
        does = f"Dynamo's frontend balances over the {workers} aggregated worker(s) with --router-mode {mode}"
    else:
        does = f"Dynamo's frontend runs --router-mode {dynamo_router_mode(chosen) or 'its default'}"
        if policy in COUNT_MODES and not cache_affinity(chosen):  # least-work's warning says so already
            does += " (which waits for each prefill before the decode: no bootstrap overlap, routers.dynamo.sources)"
    return f"routing: {priced}; {does}"


def _vllm_colocated_front(chosen: Chosen, ctx: ExportContext | None) -> str:
    """What fronts a colocated vLLM plan: vLLM's data-parallel balancer where it serves the priced instances, else
    no router (vLLM ships no balancer for separate servers)."""
    dp = vllm_dp_front(chosen, ctx) if ctx is not None else None
    if dp is not None and dp.size is not None:
        return f"{BALANCER}, a load-aware split over the {dp.size} data-parallel engines"
    if dp is not None and chosen.plan.roles()[0][1].count == 1:
        return dp.why_not
    why = "" if dp is None else f" ({dp.why_not})"
    return (
        f"vLLM ships no load balancer for separate servers{why}: put the instances behind one (round-robin splits "
        "them more evenly than the random split priced)"
    )


def sglang_policies(chosen: Chosen) -> str:
    """The router's policy flags as words (``--prefill-policy power_of_two --decode-policy random``)."""
    return " ".join(f"{flag} {value}" for flag, value in sglang_policy_flags(chosen))


def sglang_policy_flags(chosen: Chosen) -> list[tuple[str, str]]:
    """``--policy`` (colocated) or ``--prefill-policy`` / ``--decode-policy`` (disaggregated), as priced; the caching
    pool ``cache_aware`` under prefix affinity. A PrfaaS plan's ``remote-prefill`` pool has no flag of its own: its
    router (``remote-router``) takes these same flags, and pdplan prices the remote pool with the scenario's routing,
    the local prefill pool's (pdplan/search/priced.py)."""
    routing = {name: router_value("sglang", p) for name, p in priced_routing(chosen).items() if p is not None}
    if cache_affinity(chosen):
        routing[cache_role(chosen)] = "cache_aware"
    flags = {"colocated": "--policy", "prefill": "--prefill-policy", "decode": "--decode-policy"}
    return [(flags[name], routing[name]) for name, _ in chosen.plan.roles() if name in routing and name in flags]


def dynamo_router_mode(chosen: Chosen) -> str | None:
    """``--router-mode`` for the priced policy of the pool that sets the TTFT, ``kv`` for prefix affinity (module
    docstring); None where the document records none."""
    if cache_affinity(chosen):
        return "kv"
    policy = _front_pool(chosen)[1]
    return None if policy is None else router_value("dynamo", policy)


def prfaas_threshold_tokens(chosen: Chosen) -> int | None:
    """The longest prompt a PrfaaS plan prefills locally, ``⌊threshold⌋`` tokens (longer ones go remote); None
    for another plan."""
    prfaas = chosen.plan.prfaas
    return None if prfaas is None else int(prfaas.threshold_tokens)


def prfaas_warnings(chosen: Chosen, ctx: ExportContext, target: str) -> list[str]:
    """One line: the prompt-length rule the operator must set for a PrfaaS plan (module docstring)."""
    tokens = prfaas_threshold_tokens(chosen)
    if tokens is None:
        return []
    rule = f"prompts of more than {tokens} tokens"
    if target == "dynamo":
        return [
            f"Dynamo's frontend does not route by prompt length, so as written it spreads prefills over both prefill "
            f"clusters: to send only {rule} to the remote one (as priced), configure it by hand (Dynamo's "
            "global router, python -m dynamo.global_router, picks prefill pools by input length)"
        ]
    data = ctx.targets.engines["vllm" if target == "vllm" else "sglang"]
    front, port, remote = (
        ("proxy", data.proxy_port, data.remote_proxy_port)
        if target == "vllm"
        else ("router", data.router_port, data.remote_router_port)
    )
    return [
        f"no {target} router routes by prompt length: configure your gateway by hand to send {rule} to the "
        f"remote-{front} (port {remote}, the remote prefill cluster) and the rest to the {front} (port {port})"
    ]
