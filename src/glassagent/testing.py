"""Test doubles for your agents: no network, no key, deterministic.

`ScriptedClient` replays a list of answers; `FunctionClient` computes each answer with your
function. Both record every request in ``.requests``.
"""

from glassagent._testing import (
    FunctionClient,
    RecordedRequest,
    ResponseFunction,
    ScriptedClient,
    ScriptItem,
)

__all__ = ["FunctionClient", "RecordedRequest", "ResponseFunction", "ScriptItem", "ScriptedClient"]
