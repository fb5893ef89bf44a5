"""`OllamaClient` and `LlamaClient`: Ollama's ``/api/chat`` wire, native tools or JSON protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError
from glassagent._core.messages import ModelSettings, ToolProtocol
from glassagent._core.request import ModelRequest
from glassagent._core.retry import RetryPolicy
from glassagent._providers.call import CallLimits
from glassagent._providers.config import OLLAMA_BASE_URL, resolve
from glassagent._providers.ollama_wire import OllamaWire
from glassagent._providers.wire_client import WireClient

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

DEFAULT_MODEL = "llama3.1:8b"
"""The model `OllamaClient` and `LlamaClient` use when none is given."""

_NO_SETTINGS = ModelSettings()
_SHOW = "/api/show"


class OllamaClient(WireClient):
    """A client for an Ollama server (``POST /api/chat``), with raw httpx.

    Streams are NDJSON. With the JSON tool protocol the reply is JSON, so no text deltas are
    streamed; the thought and the answer follow as one delta each once the reply is complete.

    Args:
        model: The Ollama model tag, e.g. ``"llama3.1:8b"`` or ``"qwen2.5:7b"``.
        base_url: The server's address. Defaults to ``OLLAMA_API_BASE``, then
            ``OLLAMA_BASE_URL``, then ``http://localhost:11434``.
        api_key: Sent as a bearer token, for Ollama's cloud (``https://ollama.com``) or a
            server behind an authenticating proxy. Defaults to ``OLLAMA_API_KEY`` when the
            address is the default or comes from the environment; a ``base_url`` passed here
            gets no key unless one is passed with it.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        max_connections: Connections the client's own pool opens at most and keeps alive,
            per event loop (default 256); more calls at once wait for one. Not with
            ``http_client``, whose own limits apply.
        tool_protocol: ``"native"`` sends tools in Ollama's ``tools`` field; ``"json"`` uses the
            JSON tool protocol; ``"auto"`` asks the server once (``POST /api/show``) whether
            the model has the ``tools`` capability and picks ``native`` if so, else ``json``.
        json_grammar: With the JSON tool protocol, constrain replies to the protocol's JSON
            Schema (``format`` set to it; Ollama 0.5 and later), so every reply parses and
            names a tool on offer. With `False`, ``format`` is ``"json"`` (any JSON).
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded (Ollama takes no URLs: without downloads they are refused);
            `AttachmentPolicy()` when not given.
        record_wire: Attach each call's request and response bodies to its answer
            (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them;
            bodies only, the key masked in them (see `WireRecord`).
        fast_pool: Assign the owned pool's connections the cheaper way (`None`: yes unless
            ``GLASSAGENT_FAST_POOL=0``); see `HTTPTransport`.

    Raises:
        ConfigurationError: For an unknown tool protocol, or a ``max_connections`` that is
            not a positive integer or comes with an ``http_client``.
    """

    provider_name = "ollama"
    wire: OllamaWire
    """How this client speaks: Ollama's ``/api/chat`` wire."""
    _environment = "ollama"  # its row in the environment table (`_providers.config`)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        tool_protocol: ToolProtocol = "auto",
        json_grammar: bool = True,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
        fast_pool: bool | None = None,
    ) -> None:
        if tool_protocol not in ("auto", "native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'auto', 'native' or 'json'."
            )
        config = resolve(self._environment, api_key=api_key, base_url=base_url)
        secret = config.api_key or None
        wire = OllamaWire(
            model=model, encode_history=tool_protocol == "json", json_grammar=json_grammar
        )
        super().__init__(
            model,
            wire,
            base_url=config.base_url or OLLAMA_BASE_URL,
            headers={"Authorization": f"Bearer {secret}"} if secret else {},
            secret=secret,
            http_client=http_client,
            max_connections=max_connections,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
            fast_pool=fast_pool,
        )
        wire.base_url = self.base_url  # as the transport keeps it (no trailing slash)
        self._configured: ToolProtocol = tool_protocol
        self.tool_protocol = self._configured
        self._capabilities: dict[str, ToolProtocol] = {}

    @property
    def json_grammar(self) -> bool:
        """Whether JSON-protocol replies are constrained to the protocol's JSON Schema."""
        return self.wire.json_grammar

    @json_grammar.setter
    def json_grammar(self, value: bool) -> None:
        self.wire.json_grammar = value

    def __repr__(self) -> str:
        return BaseLLMClient.__repr__(self)

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``format`` set to the schema) unless the run has tools (``tool``).

        A schema in ``format`` constrains every reply, so a run with tools would never get a
        tool call; it gets the final-answer tool instead.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "tool" if tools else "native"

    async def resolve_tool_protocol(self, settings: ModelSettings | None = None) -> ToolProtocol:
        """The protocol used for this model; with ``auto``, asks the server once and caches.

        Once resolved, `tool_protocol` shows the choice (the agent resolves it before its
        first ``llm_request`` event with tools, so every such event shows it).

        Args:
            settings: Bounds the question to the server (its ``timeout``, ``stall_timeout``).

        Returns:
            ``"native"`` when the model lists the ``tools`` capability (or, on servers that
            report no capabilities, when its template mentions tools), else ``"json"``.

        Raises:
            ProviderError: When the server cannot be asked (it is retried with the model call).
        """
        limits = CallLimits.first(settings or _NO_SETTINGS, self.provider_name)
        return await self._resolve(limits)

    async def _resolve(self, limits: CallLimits) -> ToolProtocol:
        """`resolve_tool_protocol` within the limits of the model call that needs it."""
        if self._configured != "auto":
            return self._configured
        if self.model not in self._capabilities:
            self.wire.model = self.model  # the model a "not found" error names
            info = await self._transport.post_json(_SHOW, {"model": self.model}, limits)
            info = info if isinstance(info, dict) else {}
            capabilities = info.get("capabilities")
            if isinstance(capabilities, list):
                native = "tools" in capabilities
            else:
                template = info.get("template")
                native = isinstance(template, str) and ".Tools" in template
            self._capabilities[self.model] = "native" if native else "json"
        self.tool_protocol = self._capabilities[self.model]
        return self.tool_protocol

    async def _body(
        self, request: ModelRequest, *, stream: bool, limits: CallLimits
    ) -> tuple[dict[str, Any], bool]:
        """The body, and whether the JSON tool protocol is used for it (asks the server once)."""
        self.wire.model = self.model  # the model a "not found" error names
        json_mode = bool(request.tools) and await self._resolve(limits) == "json"
        body = self.wire.request_body(self.model, request, stream=stream, json_mode=json_mode)
        return body, json_mode


class LlamaClient(OllamaClient):
    """An `OllamaClient` for Llama models without native function calling.

    It always uses the JSON tool protocol and defaults to ``llama3.1:8b``.

    Args:
        model: The Ollama model tag.
        base_url: The server's address. Defaults to ``LLAMA_API_BASE``, then the variables
            of `OllamaClient`, then ``http://localhost:11434``.
        api_key: Sent as a bearer token; defaults to ``LLAMA_API_KEY``, then
            ``OLLAMA_API_KEY``, under the rule of `OllamaClient`.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership.
        max_connections: The size of the client's own pool, as for `OllamaClient`.
        attachment_policy: Which local files attachments may read, and whether remote ones
            are downloaded; `AttachmentPolicy()` when not given.
        retry: How failed calls are retried, as for `OllamaClient`.
        record_wire: Attach each call's wire bodies to its answer, as for `OllamaClient`.
        json_grammar: Constrain replies to the protocol's JSON Schema, as for `OllamaClient`.
        fast_pool: The owned pool's connection assignment, as for `OllamaClient`.
    """

    provider_name = "ollama"
    _environment = "llama"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        retry: RetryPolicy | None = None,
        record_wire: bool = False,
        json_grammar: bool = True,
        fast_pool: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            max_connections=max_connections,
            tool_protocol="json",
            json_grammar=json_grammar,
            attachment_policy=attachment_policy,
            retry=retry,
            record_wire=record_wire,
            fast_pool=fast_pool,
        )
