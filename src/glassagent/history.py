"""Conversations as a tree of messages: branching, the standard formats and safe storage.

A chat application keeps every message with its parent, so that editing a question or
regenerating an answer starts a new branch and keeps the old one. `History` is that tree;
its *thread* at `History.current_node` is what the model sees. Documents are read in the
standard format's version 1 or 2.0 and written in 2.0 (or 1 on request) without losing
anything, unknown fields included. `HistoryStore` keeps chats as files, saved atomically and
checked for concurrent writers; `SQLHistoryStore` keeps them in SQLite or PostgreSQL, a row
per message, for several servers sharing one database. Both are a `ChatStore`.

Pass a history to an agent run to use it as context and extend it:

```python
history = History()
await agent.run("Hello", history=history, append_to_history=True)
```

Attachments are stored by URL: a neutral `Attachment` made from a path is stored with the path
as its ``url``, one with a remote URL keeps it, one made from bytes becomes a ``data:`` URL.
The ``type`` comes from the mime type (``image/*``, ``video/*``, ``audio/*``, else ``file``).
Going back to the model, ``data:`` URLs give bytes, ``file:`` URLs and plain paths give local
files and ``http(s):`` URLs give remote attachments, as the history's `AttachmentPolicy`
allows. Load a history from anyone else with ``attachment_policy=AttachmentPolicy.safe()``, so
it cannot make glassagent read local files.
"""

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.errors import HistoryConflictError, HistoryProblem, HistoryValidationError
from glassagent._history.helpers import (
    add_message_to_history,
    create_standard_history,
    create_standard_message,
    get_conversation_thread,
)
from glassagent._history.model import (
    AttachmentType,
    HistoryAttachment,
    HistoryLimits,
    HistoryMessage,
    HistoryToolCall,
    Version,
)
from glassagent._history.protocol import ChatStore
from glassagent._history.sql import SQLHistoryStore
from glassagent._history.store import HistoryStore
from glassagent._history.tree import History
from glassagent._public import publish

__all__ = [
    "AttachmentPolicy",
    "AttachmentType",
    "ChatStore",
    "History",
    "HistoryAttachment",
    "HistoryConflictError",
    "HistoryLimits",
    "HistoryMessage",
    "HistoryProblem",
    "HistoryStore",
    "HistoryToolCall",
    "HistoryValidationError",
    "SQLHistoryStore",
    "Version",
    "add_message_to_history",
    "create_standard_history",
    "create_standard_message",
    "get_conversation_thread",
]

# AttachmentPolicy is at home in glassagent.llm, the errors in glassagent.errors.
_HOME_ELSEWHERE = {"AttachmentPolicy", "HistoryConflictError", "HistoryValidationError"}
publish(__name__, globals(), [name for name in __all__ if name not in _HOME_ELSEWHERE])
publish("glassagent.llm", globals(), ["AttachmentPolicy"])
publish("glassagent.errors", globals(), ["HistoryConflictError", "HistoryValidationError"])
