"""Validated input specifications (pydantic, frozen, ``extra="forbid"``): hardware, links, models, workloads."""
