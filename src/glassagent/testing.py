"""Test doubles for your agents: no network, no key, deterministic.

`ScriptedClient` replays a list of answers; `FunctionClient` computes each answer with your
function. Both are `BaseLLMClient`s: they stream each answer in a few chunks, like a model,
and record every request in ``.requests``. `ReplayClient` answers as a recorded run's model
did (``result.save_events(path)``), and fails with a diff when the agent asks otherwise: a
real session becomes an offline regression test.
"""

from glassagent._public import publish
from glassagent._testing.clients import (
    FunctionClient,
    RecordedRequest,
    ResponseFunction,
    ScriptedClient,
    ScriptItem,
)
from glassagent._testing.replay import ReplayClient

__all__ = [
    "FunctionClient",
    "RecordedRequest",
    "ReplayClient",
    "ResponseFunction",
    "ScriptItem",
    "ScriptedClient",
]

publish(__name__, globals(), __all__)
