"""The pydantic models of pdplan.specs are created from evaluated annotations, not strings (start-up, issue #27:
pydantic evaluates a string annotation with a ``compile`` and an ``eval`` when the class is created; see
``pdplan/specs/__init__.py``)."""

import __future__

import importlib
import pkgutil

import pydantic

import pdplan.specs


def _spec_modules() -> list[str]:
    return [f"pdplan.specs.{info.name}" for info in pkgutil.iter_modules(pdplan.specs.__path__)]


def _models_of(module: object) -> list[type[pydantic.BaseModel]]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, pydantic.BaseModel)
        and value.__module__ == getattr(module, "__name__", None)
    ]


def test_model_modules_do_not_postpone_annotations() -> None:
    postponed = []
    for name in _spec_modules():
        module = importlib.import_module(name)
        if _models_of(module) and getattr(module, "annotations", None) is __future__.annotations:
            postponed.append(name)
    assert postponed == []


def test_model_fields_are_not_strings() -> None:
    """Only a self-reference is written as a string, and pydantic has resolved every field's type."""
    quoted = {}
    for name in _spec_modules():
        for model in _models_of(importlib.import_module(name)):
            assert model.__pydantic_complete__, model
            strings = {field: note for field, note in model.__annotations__.items() if isinstance(note, str)}
            if strings:
                quoted[model.__name__] = strings
    assert quoted == {"GemmParams": {"small_m": "GemmParams | None"}}
