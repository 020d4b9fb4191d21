"""The multi-turn chat sessions the colocated prefix-cache tests price: 3.1 turns on average (geometric), lognormal
new tokens (mean 300) and outputs (mean 200), a 5 s exponential think time and a 500-token system prompt."""

from __future__ import annotations

from typing import Any

CHAT_SESSIONS: dict[str, Any] = {
    "turns": {"dist": "geometric", "mean": 3.1},
    "new_tokens": {"dist": "lognormal", "mean": 300, "sigma": 1.0, "max": 8192},
    "output_tokens": {"dist": "lognormal", "mean": 200, "sigma": 1.0, "max": 2048},
    "think_time": {"dist": "exponential", "mean": "5s"},
    "system_prompt_tokens": 500,
}
"""A workload's ``sessions`` block (copy it before changing it)."""
