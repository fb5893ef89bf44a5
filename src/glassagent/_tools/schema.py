"""Signature + docstring -> JSON Schema and an argument validator, through public pydantic APIs."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from glassagent._core.errors import UserError
from glassagent._tools.invalid import InvalidArguments

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_VALUES = frozenset({"default", "const", "enum", "examples"})  # data, not schemas


@dataclass(frozen=True)
class Signature:
    """A tool function's parameters, analysed once."""

    description: str
    parameters: dict[str, Any]
    model: type[BaseModel]
    fields: tuple[tuple[str, str, bool], ...]  # (model field, parameter name, positional-only)
    context_param: str | None

    def bind(self, arguments: dict[str, Any], ctx: Any) -> tuple[list[Any], dict[str, Any]]:
        """Validate the model's arguments and return ``(args, kwargs)``, `ctx` injected.

        Raises:
            InvalidArguments: When validation fails.
        """
        try:
            validated = self.model.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidArguments(_describe(exc)) from None
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field_name, param, positional in self.fields:
            value = getattr(validated, field_name)
            if positional:
                args.append(value)
            else:
                kwargs[param] = value
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return args, kwargs


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


def is_context(annotation: Any) -> bool:
    """Whether `annotation` is `ToolContext` (possibly parametrised or ``Annotated``).

    The class is known by its own ``_is_tool_context`` mark (a subclass has none): it is built
    on the tools described here, so this module cannot import it.
    """
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    cls = get_origin(annotation) or annotation
    return isinstance(cls, type) and vars(cls).get("_is_tool_context") is True


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])


def _tidy(schema: Any) -> Any:
    """Remove pydantic's generated ``title`` keywords and ``"default": null``.

    Models do not need the titles; a null default made small models send ``null`` as a
    value. A parameter that defaults to `None` stays optional (not ``required``) and still
    accepts ``null``.
    """
    if isinstance(schema, list):
        return [_tidy(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and value is None:
            continue
        if key in _VALUES:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _tidy(sub) for name, sub in value.items()}
        else:
            out[key] = _tidy(value)
    return out


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn)
    if not doc:
        return "", {}
    parsed = docstring_parser.parse(doc)
    text = "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p)
    params = {p.arg_name: p.description for p in parsed.params if p.description}
    return text, params


def check_name(name: str) -> None:
    """Raise `UserError` unless `name` is 1-64 letters, digits, ``_`` or ``-``."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise UserError(f"Tool name {name!r} must be 1-64 letters, digits, '_' or '-'.")


def analyse(fn: Callable[..., Any], name: str, description: str | None) -> Signature:
    """Analyse `fn` once: its JSON Schema, its description and a validator for its arguments.

    Raises:
        UserError: When the function cannot be a tool (``*args``, unresolvable hints, bad name).
    """
    check_name(name)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UserError(f"Cannot resolve the type hints of tool {name!r}: {exc}") from exc
    doc_text, doc_params = _docstring(fn)
    definitions: dict[str, Any] = {}
    fields: list[tuple[str, str, bool]] = []
    context_param = None
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        annotation = hints.get(param.name, Any)
        if is_context(annotation):
            if param.kind is param.POSITIONAL_ONLY or context_param is not None:
                raise UserError(f"Tool {name!r}: one keyword-usable ToolContext parameter at most.")
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(f"Tool {name!r}: *args and **kwargs cannot be described to a model.")
        field_kwargs: dict[str, Any] = {"alias": param.name}
        if param.name in doc_params and not _has_description(annotation):
            field_kwargs["description"] = doc_params[param.name]
        if param.default is not param.empty:
            field_kwargs["default"] = param.default
        field_name = f"p{index}"
        definitions[field_name] = (annotation, Field(**field_kwargs))
        fields.append((field_name, param.name, param.kind is param.POSITIONAL_ONLY))
    try:
        model = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **definitions,
        )
        schema = model.model_json_schema(by_alias=True)
    except Exception as exc:
        raise UserError(f"Tool {name!r}: cannot derive a JSON schema: {exc}") from exc
    parameters = _tidy(schema)
    parameters.setdefault("properties", {})
    return Signature(
        description=description if description is not None else doc_text,
        parameters=parameters,
        model=model,
        fields=tuple(fields),
        context_param=context_param,
    )
