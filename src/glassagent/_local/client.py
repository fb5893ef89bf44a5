"""`LocalServerClient`: the client `LocalServer.client` hands out, with its slow-call hint."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from glassagent._core.messages import LLMResponse, ModelSettings, StreamPart
from glassagent._core.request import ModelRequest
from glassagent._providers.openai_compat import OpenAICompatibleClient

if TYPE_CHECKING:
    from glassagent._core.profiles.model import ModelProfile

logger = logging.getLogger("glassagent.local")

LOCAL_CALL_SECONDS = 300.0
"""The deadline of a call to the embedded server that sets no `ModelSettings.timeout`:
with `max_tokens` bounding the answer too, no call waits forever."""

TOKENIZER = "llama.cpp /tokenize"
"""The name `LocalServerClient.tokenizer` gives its counts (the ``context_compacted`` event's)."""

TOKENIZE_SECONDS = 10.0
"""How long one ``/tokenize`` request to the embedded server may take."""

SLOW_CALL_SECONDS = 10.0
"""A call to the local server that takes longer than this prints the slow-call hint."""


class SlowCallHint:
    """Logs, once per server start, that a call was slow and what may help."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.given = False

    def check(self, response: LLMResponse, wall_seconds: float) -> None:
        """Log the hint if this call was slow and the hint was not given yet.

        The server's own timings (prompt and generation) are used when it reports them, so
        a consumer that reads a stream slowly does not count as a slow model.
        """
        timings = response.timings
        if "prompt_ms" in timings or "predicted_ms" in timings:
            seconds = (timings.get("prompt_ms", 0.0) + timings.get("predicted_ms", 0.0)) / 1000
        else:
            seconds = wall_seconds
        if self.given or seconds < SLOW_CALL_SECONDS:
            return
        self.given = True
        fewer = (
            "On a busy machine, fewer threads are often much faster: try LocalServer(threads=1). "
            if self.threads > 1
            else ""
        )
        logger.warning(
            "glassagent: a call to the local model took %.0f s with %d CPU thread(s). %s"
            "Shorter answers (ModelSettings(max_tokens=...)), a smaller context_size or a "
            "smaller model help too. (This hint is shown once per server.)",
            seconds,
            self.threads,
            fewer,
        )


def local_client(
    base_url: str,
    model: str,
    api_key: str,
    hint: SlowCallHint,
    options: dict[str, Any],
    context_size: int | None = None,
) -> LocalServerClient:
    """The client of an embedded server, with the defaults `LocalServer.client` documents.

    The default model gets the JSON tool protocol with its grammar: measured on the coding
    agent's prompts, it is the protocol whose replies always parse and whose answers stream
    (llama.cpp's native tool calls hold back all text until the reply is complete and
    refuse the small model's plain answers).
    """
    from glassagent._local.model import DEFAULT_MODEL

    model = options.pop("model", None) or model
    options.setdefault("api_key", api_key)
    options.setdefault("json_grammar", True)
    if model == DEFAULT_MODEL.name:
        options.setdefault("tool_protocol", "json")
    client = LocalServerClient(model, base_url=base_url, hint=hint, **options)
    client.context_size = context_size
    return client


def bounded(settings: ModelSettings | None) -> ModelSettings:
    """`settings` with a deadline: `LOCAL_CALL_SECONDS` unless they give one."""
    if settings is None:
        return ModelSettings(timeout=LOCAL_CALL_SECONDS)
    return (
        settings if settings.timeout is not None else replace(settings, timeout=LOCAL_CALL_SECONDS)
    )


class LocalServerClient(OpenAICompatibleClient):
    """The `OpenAICompatibleClient` that `LocalServer.client` returns.

    It carries the server's API key and behaves like any `OpenAICompatibleClient`, with these
    differences. A call without a `ModelSettings.timeout` ends after 300 seconds
    (`LOCAL_CALL_SECONDS`). The first call that takes longer than 10 seconds logs a hint on
    the ``glassagent.local`` logger (printed to standard error unless you configure logging)
    on how to make calls faster. A `ModelSettings.tool_choice` naming one tool is sent as
    that tool alone with ``tool_choice="required"``: llama.cpp's server reads ``tool_choice``
    as a string only and would quietly treat OpenAI's named form as ``"auto"``. And its
    profile's ``context_length`` is the server's `context_size`.

    Args:
        model: The model name.
        hint: The server's slow-call hint, shared by all its clients.
        **options: Keyword arguments for `OpenAICompatibleClient`.
    """

    _named_tool_choice = False  # llama.cpp reads tool_choice as a string: auto/none/required

    context_size: int | None = None
    """The context window the server was started with; the profile's ``context_length``
    says so (`None`: the profile as shipped)."""

    def __init__(self, model: str, *, hint: SlowCallHint, **options: Any) -> None:
        super().__init__(model, **options)
        self._hint = hint

    @property
    def profile(self) -> ModelProfile | None:
        """The model's profile, its ``context_length`` the server's `context_size`."""
        profile = super().profile
        size = self.context_size
        if profile is None or size is None or profile.capabilities.context_length == size:
            return profile
        capabilities = profile.capabilities.model_copy(update={"context_length": size})
        return profile.model_copy(update={"capabilities": capabilities})

    @property
    def tokenizer(self) -> str | None:
        """``"llama.cpp /tokenize"``: the server counts with the model's own tokenizer."""
        return TOKENIZER

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """The tokens of each text by the model's tokenizer (the server's ``/tokenize``).

        `None` when the server cannot be asked (it is stopped, or answers otherwise).

        Args:
            texts: The texts to count.
        """
        import httpx  # only here: importing glassagent.local must not load it

        root = self.base_url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {self._secret}"} if self._secret else {}
        counts: list[int] = []
        try:
            async with httpx.AsyncClient(timeout=TOKENIZE_SECONDS, trust_env=False) as http:
                for text in texts:  # one connection, kept alive: about a millisecond each
                    answer = await http.post(
                        f"{root}/tokenize", json={"content": text}, headers=headers
                    )
                    answer.raise_for_status()
                    tokens = answer.json()["tokens"]
                    if not isinstance(tokens, list):
                        return None
                    counts.append(len(tokens))
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
        return counts

    async def send(self, request: ModelRequest) -> LLMResponse:
        """Send the request and return the complete answer, like `OpenAICompatibleClient`.

        `chat` comes here too. A request without a timeout gets `LOCAL_CALL_SECONDS`.

        Args:
            request: The call, built once by `ModelRequest.build`.
        """
        started = time.monotonic()
        response = await super().send(replace(request, settings=bounded(request.settings)))
        self._hint.check(response, time.monotonic() - started)
        return response

    async def send_stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the answer, like `OpenAICompatibleClient.send_stream`; `stream` comes here too.

        Args:
            request: The call, built once by `ModelRequest.build`.

        Yields:
            `ThinkingDelta` and `TextDelta` parts, then exactly one `LLMResponse`.
        """
        started = time.monotonic()
        parts = cast(
            "AsyncGenerator[StreamPart, None]",
            super().send_stream(replace(request, settings=bounded(request.settings))),
        )
        async with contextlib.aclosing(parts):  # closing us closes the HTTP response at once
            async for part in parts:
                if isinstance(part, LLMResponse):
                    self._hint.check(part, time.monotonic() - started)
                yield part
