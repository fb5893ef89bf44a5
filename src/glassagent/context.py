"""Context policies: long conversations keep running on a model's limited window.

A conversation longer than the model's context window is refused before the request
(`ContextLengthError`) unless the agent has a context policy, which decides what of the
conversation each model call sends:

- `KeepTurns` sends the last few turns;
- `FitWindow` leaves out the oldest turns until the request fits the window;
- `Summarize` writes a summary of the older turns with a model, and sends it in their place.

```python
agent = Agent(client, tools, context_policy=Summarize(keep_turns=2))
```

A policy changes what is *sent*, never the conversation: `RunResult.all_messages` and the
history keep every message. A summary is a new ``system`` message of the conversation
(`Message.summary_of` says how many messages it covers), stored in the history, so a later
turn reuses it; requests carry it in their system instructions. No policy separates a tool
call from its result, or leaves out the system prompt, a ``system`` message, a pinned
message (`Message.pinned`) or the current user message. Each model call whose request
leaves out other messages than the previous call's is preceded by a ``context_compacted``
event (`glassagent.events.ContextCompactedEvent`). See "Long conversations".
"""

from glassagent._agent.context_policy import (
    DEFAULT_INSTRUCTIONS,
    SUMMARY_HEADING,
    ContextPolicy,
    FitWindow,
    KeepTurns,
    Summarize,
)
from glassagent._agent.tokens import ESTIMATE, MESSAGE_OVERHEAD
from glassagent._public import publish

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "ESTIMATE",
    "MESSAGE_OVERHEAD",
    "SUMMARY_HEADING",
    "ContextPolicy",
    "FitWindow",
    "KeepTurns",
    "Summarize",
]

publish(__name__, globals(), __all__)
