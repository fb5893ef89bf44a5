"""The direct invoke API: one agent turn over HTTP, on a posted, stored or new conversation.

A chat UI or a batch job posts a message, optionally with the conversation so far, and gets
the answer. `invoke` is the plain async function; `create_app` wraps it in an ASGI app
(``glassagent[server]``: Starlette and uvicorn) with authentication, limits and streaming,
and `serve` (or `aserve`, in a running event loop) runs that app (the command
``glassagent serve`` does all three from the command line):

```python
app = create_app(model=client, tools=[add], store="chats", tokens=load_tokens("tokens.json"))
serve(app, host="0.0.0.0", port=8000)
```

``POST /api/ai/invoke`` takes ``{"message", "model_id"?, "history"?, "chat_id"?,
"append_to_history"?, "system_prompt"?, "tools_config"?: {"active_tools"}, "params"?,
"max_iterations"?, "stream"?}`` and answers ``{"text", "status", "stop_reason", "usage",
"cost", "iterations", "budget_exceeded"?, "approvals"?, "chat_id"?, "history"?}``, or with
``"stream": true`` one Server-Sent Event per run event. A turn whose tool calls need a
person's approval ends with ``"status": "awaiting_approval"`` and the calls in
``approvals``; a request with ``"approvals": {"<call id>": true | false | "reason"}`` instead
of a message resumes it. ``GET /api/ai/chats/{chat_id}``
returns a stored chat to its owner, ``GET /api/ai/chats`` lists the user's chats, and
``GET /api/ai/health`` answers probes. ``GET /`` is a web page that chats with the agent and
shows each step of a turn as it streams. Importing this module needs neither Starlette nor
uvicorn; `create_app`, `serve` and `aserve` do.

The app is closed to other web sites whatever its tokens: it answers only a loopback
``Host`` (or the address it is reached at, or an allowed host), refuses requests another
site made (``Origin``, ``Sec-Fetch-Site``), and takes only JSON in a ``POST``. ``glassagent
serve`` without ``--tokens`` makes a random token at each start (``access_token``) and prints
the web view's address that carries it.
"""

from glassagent._history.store import user_directory
from glassagent._public import publish
from glassagent._server.chats import ANONYMOUS_USER
from glassagent._server.hosts import check_allowed_hosts, check_allowed_origins
from glassagent._server.invoke import InvokeResult, InvokeStatus, ModelsLike, invoke
from glassagent._server.request import InvokeError, InvokeRequest, ServerLimits
from glassagent._server.serve import aserve, check_host, create_app, load_tokens, serve

__all__ = [
    "ANONYMOUS_USER",
    "InvokeError",
    "InvokeRequest",
    "InvokeResult",
    "InvokeStatus",
    "ModelsLike",
    "ServerLimits",
    "aserve",
    "check_allowed_hosts",
    "check_allowed_origins",
    "check_host",
    "create_app",
    "invoke",
    "load_tokens",
    "serve",
    "user_directory",
]

publish(__name__, globals(), __all__)
