"""`OutputSchema`: the JSON Schema an answer must follow, as every client receives it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from glassagent._core.errors import UserError

OutputMode = Literal["native", "tool", "prompted"]
"""How a run gets an answer that follows its output schema: the provider's own constrained
mode (``native``: the schema rides in `ModelSettings.output_schema`), a final-answer tool
whose parameters are the schema (``tool``), or the schema in the system prompt
(``prompted``)."""

FINAL_TOOL = "final_result"
"""The final-answer tool's name: a run in ``tool`` mode ends when the model calls it."""

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, kw_only=True)
class OutputSchema:
    """The JSON Schema a model's answer must follow, for a provider's constrained mode.

    The agent sets it in `ModelSettings.output_schema` for clients that answer in a native
    structured mode (`BaseLLMClient.output_mode`); a client that cannot honour it refuses
    the request with `ConfigurationError`. It can also be given to a client directly.
    """

    name: str
    """A name for the schema (letters, digits, ``_`` and ``-``; at most 64 characters), sent
    where the provider wants one (OpenAI's ``json_schema.name``, Anthropic's forced tool)."""
    schema: Mapping[str, Any]
    """The JSON Schema of the answer: an ``object`` schema."""
    description: str | None = None
    """What the answer is, for the model."""
    strict: bool = False
    """Ask for strict schema adherence where the provider distinguishes it (OpenAI's
    ``strict``); only for schemas strict mode accepts (every property required, no extra
    properties)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise UserError(
                f"OutputSchema.name must be 1 to 64 letters, digits, '_' or '-', not {self.name!r}."
            )
        if not isinstance(self.schema, Mapping) or self.schema.get("type") != "object":
            raise UserError('OutputSchema.schema must be an object schema ({"type": "object"}).')


def schema_name(text: str) -> str:
    """`text` made a valid `OutputSchema.name` (other characters become ``_``)."""
    return _NAME.sub("_", text).strip("_")[:64] or "output"
