"""KV-cache transfer from prefill to decode: bytes per request, link time by granularity, TP re-layout
(:mod:`pdplan.transfer.kv`), and the load that many prefill instances put on shared NICs
(:mod:`pdplan.transfer.fan_in`)."""
