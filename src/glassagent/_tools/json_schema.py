"""Tools described by a JSON Schema given as is, their arguments checked with `jsonschema`."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints

from glassagent._core.errors import UserError
from glassagent._tools.invalid import InvalidArguments

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_SHOWN_PROBLEMS = 10
_PROBLEM_CHARS = 300


@dataclass(frozen=True)
class SchemaSignature:
    """A schema tool's parameters: the schema, its validator and where the context goes."""

    parameters: dict[str, Any]
    validator: Validator
    context_param: str | None
    context_positional: bool

    def bind(self, arguments: dict[str, Any], ctx: Any) -> tuple[list[Any], dict[str, Any]]:
        """Validate the model's arguments against the schema; return ``(args, kwargs)``.

        The arguments become keyword arguments; the context goes where the function wants it.

        Raises:
            InvalidArguments: When the arguments do not fit the schema.
        """
        try:
            problems = sorted(self.validator.iter_errors(arguments), key=lambda e: list(e.path))
        except Exception as exc:  # e.g. a "$ref" the schema cannot resolve
            raise InvalidArguments(f"cannot be checked against the tool's schema: {exc}") from None
        if problems:
            raise InvalidArguments(_describe(problems))
        args: list[Any] = []
        kwargs = dict(arguments)
        if self.context_param is not None:
            if self.context_positional:
                args.append(ctx)
            else:
                kwargs[self.context_param] = ctx
        return args, kwargs


def _describe(problems: list[Any]) -> str:
    lines = []
    for problem in problems[:_SHOWN_PROBLEMS]:
        where = ".".join(str(p) for p in problem.absolute_path) or "arguments"
        message = str(problem.message)
        if len(message) > _PROBLEM_CHARS:
            message = message[: _PROBLEM_CHARS - 3] + "..."
        lines.append(f"{where}: {message}")
    if len(problems) > _SHOWN_PROBLEMS:
        lines.append(f"and {len(problems) - _SHOWN_PROBLEMS} more")
    return "; ".join(lines)


def _context_parameter(function: Callable[..., Any], name: str) -> tuple[str | None, bool]:
    """The function's `ToolContext` parameter, if it has one, and whether it is positional."""
    from glassagent._tools.schema import is_context

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: it takes no context
        return None, False
    try:
        hints = get_type_hints(function)
    except Exception:
        hints = {}
    found = [p for p in parameters if is_context(hints.get(p.name, p.annotation))]
    if len(found) > 1:
        raise UserError(f"Tool {name!r}: one ToolContext parameter at most.")
    if not found:
        return None, False
    param = found[0]
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        raise UserError(f"Tool {name!r}: the ToolContext parameter cannot be *args or **kwargs.")
    return param.name, param.kind is param.POSITIONAL_ONLY


def schema_signature(
    name: str, parameters: Mapping[str, Any], function: Callable[..., Any]
) -> SchemaSignature:
    """Check `parameters` as a JSON Schema and build the validator of a schema tool.

    Raises:
        UserError: When the schema is not a valid JSON Schema of an object, or when the
            function's `ToolContext` parameter is also the name of a property.
    """
    from jsonschema import Draft202012Validator, SchemaError, validators

    if not isinstance(parameters, Mapping):
        raise UserError(f"Tool {name!r}: the parameters must be a JSON Schema object (a dict).")
    schema = copy.deepcopy(dict(parameters))
    if schema.get("type", "object") != "object":
        raise UserError(f"Tool {name!r}: the parameters schema must describe an object.")
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UserError(f"Tool {name!r}: invalid JSON Schema: {exc.message}") from None
    context_param, positional = _context_parameter(function, name)
    properties = schema.get("properties")
    if (
        context_param is not None
        and not positional
        and isinstance(properties, Mapping)
        and context_param in properties
    ):
        raise UserError(
            f"Tool {name!r}: the ToolContext parameter {context_param!r} is also a property "
            "of the schema; rename it or make it positional-only."
        )
    return SchemaSignature(schema, cls(schema), context_param, positional)
