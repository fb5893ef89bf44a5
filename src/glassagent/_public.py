"""`publish`: exported names carry their public module, as httpx's do."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Iterable, Mapping


def publish(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Give each class and function of `names` the ``__module__`` `module`.

    Reprs, tracebacks and pickles then name e.g. ``glassagent.errors.ProviderError``, not the
    private module that defines it, and pickles stay loadable when private modules move.
    Constants and type aliases have no module of their own and are left alone. A name that
    two public modules export is published by the one documented as its home.
    """
    for name in names:
        obj = namespace[name]
        if inspect.isclass(obj):
            _resolve_annotations(obj)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            obj.__module__ = module


def _resolve_annotations(cls: type) -> None:
    """Evaluate the class's own string annotations in the module that wrote them.

    pydantic and `typing.get_type_hints` look names up in ``sys.modules[cls.__module__]``,
    which no longer holds them once the class is published. Annotations that cannot be
    evaluated (names imported only for type checkers) stay strings.
    """
    own = inspect.get_annotations(cls)
    defined_in = sys.modules.get(cls.__module__)
    if not own or defined_in is None:
        return
    scope = {**vars(defined_in), cls.__name__: cls}
    resolved = dict(own)
    for name, annotation in own.items():
        if isinstance(annotation, str):
            with contextlib.suppress(Exception):
                # our own source text, evaluated as `typing.get_type_hints` would
                resolved[name] = eval(annotation, scope, dict(vars(cls)))
    cls.__annotations__ = resolved
    fields = cls.__dict__.get("__dataclass_fields__", {}) if dataclasses.is_dataclass(cls) else {}
    for name, field in fields.items():
        if name in resolved:  # pydantic reads the fields' types, not __annotations__
            field.type = resolved[name]
