"""Test doubles for your agents: no network, no key, deterministic.

`ScriptedClient` replays a list of answers; `FunctionClient` computes each answer with your
function. Both are `BaseLLMClient`s: they stream each answer in a few chunks, like a model,
and record every request in ``.requests``.
"""

from glassagent._public import publish
from glassagent._testing import (
    FunctionClient,
    RecordedRequest,
    ResponseFunction,
    ScriptedClient,
    ScriptItem,
)

__all__ = ["FunctionClient", "RecordedRequest", "ResponseFunction", "ScriptItem", "ScriptedClient"]

publish(__name__, globals(), __all__)
