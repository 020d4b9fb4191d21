"""Validated input specifications (pydantic, frozen, ``extra="forbid"``): hardware, links, models, workloads.

The modules here that define pydantic models do not write ``from __future__ import annotations``: with postponed
annotations every field's annotation is a string, which pydantic evaluates when the class is created
(``typing.ForwardRef``: a ``compile`` and an ``eval`` per field) for each of the 92 models a default ``pdplan evaluate``
loads: 1.6 % of that command's instructions (2,419 → 2,381 million, about 8 ms; start-up, issue #27, docs/accuracy.md
§7.3). Evaluated by the interpreter as the class body runs, the same annotations give the same fields and schemas. A
method or field that names its own class (a validator returning ``self``) quotes the name;
``tests/unit/test_specs_annotations.py`` keeps it so.
"""
