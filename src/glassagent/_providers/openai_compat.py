"""`OpenAICompatibleClient`: the chat-completions wire of OpenAI, llama-server, vLLM, LM Studio."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from glassagent._core.attachments import AttachmentPolicy
from glassagent._core.client import BaseLLMClient
from glassagent._core.errors import ConfigurationError
from glassagent._core.messages import ModelSettings
from glassagent._core.request import ModelRequest
from glassagent._core.retry import RetryPolicy
from glassagent._providers import openai_wire as wire
from glassagent._providers import tiktoken_count
from glassagent._providers.builder import parse_arguments
from glassagent._providers.call import CallLimits
from glassagent._providers.config import OPENAI_API_BASE, resolve
from glassagent._providers.openai_wire import OpenAIWire, wire_messages, wire_tools
from glassagent._providers.transport import HTTPTransport, StatusHook
from glassagent._providers.wire_client import WireClient

if TYPE_CHECKING:
    import httpx

    from glassagent._core.output import OutputMode

# Kept importable from here: older code and plugins import them from this module.
__all__ = ["OpenAICompatibleClient", "parse_arguments", "wire_messages", "wire_tools"]


@dataclass(frozen=True, repr=False)  # no repr: the headers carry the key
class Connection:
    """Where and how a chat-completions client sends its requests."""

    provider: str
    base_url: str
    path: str
    """The path of ``POST`` requests under `base_url`, with its query (``?api-version=``)."""
    headers: dict[str, str]
    secret: str | None
    """The key, masked wherever the client shows text (errors, recorded bodies)."""
    start_hint: str = wire.START_HINT
    status_hook: StatusHook | None = None
    """Maps error statuses to typed errors; by default llama.cpp's parse failure."""
    transport: Callable[..., HTTPTransport] = field(default=HTTPTransport)


class OpenAICompatibleClient(WireClient):
    """A client for any server with OpenAI's ``POST /chat/completions`` wire.

    It serves OpenAI itself, llama.cpp's ``llama-server``, vLLM, LM Studio and other
    compatible servers, with raw httpx (no vendor SDK).

    Args:
        model: The model name the server knows, e.g. ``"gpt-4o-mini"``.
        base_url: The API root (ending in ``/v1`` for most servers). Defaults to
            ``OPENAI_API_BASE``, then ``OPENAI_BASE_URL``, then OpenAI's own URL.
        api_key: Sent as a bearer token (surrounding white space removed). It defaults to
            ``OPENAI_API_KEY`` for OpenAI's own URL or the one the environment names, and is
            required for OpenAI's own URL; a ``base_url`` passed here gets no key unless one
            is passed with it, so an OpenAI key never leaves for another server.
        organization: Sent as the ``OpenAI-Organization`` header; defaults to
            ``OPENAI_ORG_ID`` under the same rule as the key.
        api_version: Sent as the ``api-version`` query parameter (gateways that want one;
            Azure OpenAI has `AzureOpenAIClient`); defaults to ``OPENAI_API_VERSION`` under
            the same rule as the key.
        http_client: An ``httpx.AsyncClient`` to use; the caller keeps ownership (it is not
            closed by `aclose`). By default the client creates and owns one.
        max_connections: Connections the client's own pool opens at most and keeps alive,
            per event loop (default 256); more calls at once wait for one. Not with
            ``http_client``, whose own limits apply.
        tool_protocol: ``"native"`` sends tools in the ``tools`` field; ``"json"`` uses the
            JSON tool protocol in the system prompt, for models without tool calling.
        json_grammar: With the JSON tool protocol, constrain replies to the protocol's JSON
            Schema (`response_format` of type ``json_schema``; llama.cpp's server, vLLM and
            LM Studio enforce it while decoding), so every reply parses and names a tool on
            offer. Off by default, since not every server enforces a schema: replies are
            then asked to be any JSON object. `LocalServer.client` turns it on.
        retry: How failed calls are retried (`ModelSettings.retry` overrides it per call);
            by default `RetryPolicy()`.
        attachment_policy: Which local files attachments may read and whether remote ones are
            passed on or downloaded; `AttachmentPolicy()` when not given. Remote images go as
            ``image_url`` URLs; other remote files need downloads allowed.
        record_wire: Attach each call's request and response bodies to its answer
            (`LLMResponse.wire`), so ``llm_response`` events and recordings carry them;
            bodies only, the key masked in them (see `WireRecord`).
        fast_pool: Assign the owned pool's connections the cheaper way (`None`: yes unless
            ``GLASSAGENT_FAST_POOL=0``); see `HTTPTransport`.

    Raises:
        ConfigurationError: When OpenAI's own URL is used without an API key, for an
            unknown tool protocol, or for a ``max_connections`` that is not a positive
            integer or comes with an ``http_client``.
    """

    _named_tool_choice = True
    """Whether the server takes a tool choice naming one tool (llama.cpp's does not)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        api_version: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        tool_protocol: Literal["native", "json"] = "native",
        json_grammar: bool = False,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
        fast_pool: bool | None = None,
    ) -> None:
        config = resolve(
            "openai",
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            api_version=api_version,
        )
        base = config.base_url or OPENAI_API_BASE
        key = config.api_key
        is_openai = base == OPENAI_API_BASE
        if is_openai and not key:
            raise ConfigurationError(
                "OpenAI needs an API key: pass api_key=... or set OPENAI_API_KEY."
            )
        path = wire.PATH
        if config.api_version:
            path += "?api-version=" + quote(config.api_version, safe="")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if config.organization:
            headers["OpenAI-Organization"] = config.organization
        self._setup(
            model,
            Connection("openai" if is_openai else "openai_compatible", base, path, headers, key),
            http_client=http_client,
            max_connections=max_connections,
            tool_protocol=tool_protocol,
            json_grammar=json_grammar,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
            fast_pool=fast_pool,
        )

    def _setup(
        self,
        model: str,
        connection: Connection,
        *,
        http_client: httpx.AsyncClient | None,
        max_connections: int | None,
        tool_protocol: Literal["native", "json"],
        json_grammar: bool,
        retry: RetryPolicy | None,
        attachment_policy: AttachmentPolicy | None,
        record_wire: bool,
        fast_pool: bool | None = None,
    ) -> None:
        """Set the client up for `connection` (a subclass's ``__init__`` makes its own)."""
        if tool_protocol not in ("native", "json"):
            raise ConfigurationError(
                f"Unknown tool_protocol {tool_protocol!r}; use 'native' or 'json'."
            )
        wire = OpenAIWire(
            connection.provider,
            connection.path,
            json_tools=tool_protocol == "json",
            json_grammar=json_grammar,
            named_choice=self._named_tool_choice,
            start_hint=connection.start_hint,
            status_hook=connection.status_hook,
        )
        super().__init__(
            model,
            wire,
            base_url=connection.base_url,
            headers=connection.headers,
            secret=connection.secret,
            http_client=http_client,
            max_connections=max_connections,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
            fast_pool=fast_pool,
            transport=connection.transport,
        )

    def __repr__(self) -> str:
        return BaseLLMClient.__repr__(self)

    wire: OpenAIWire
    """How the client speaks chat completions (its path, tool protocol and grammar)."""

    @property  # type: ignore[override]  # a class attribute of BaseLLMClient
    def tool_protocol(self) -> Literal["native", "json"]:
        """``native`` (the ``tools`` field) or ``json`` (the JSON tool protocol); settable."""
        return "json" if self.wire.json_tools else "native"

    @tool_protocol.setter
    def tool_protocol(self, value: Literal["native", "json"]) -> None:
        if value not in ("native", "json"):
            raise ConfigurationError(f"Unknown tool_protocol {value!r}; use 'native' or 'json'.")
        self.wire.json_tools = value == "json"

    @property
    def json_grammar(self) -> bool:
        """Whether JSON-protocol replies are constrained to the protocol's JSON Schema."""
        return self.wire.json_grammar

    @json_grammar.setter
    def json_grammar(self, value: bool) -> None:
        self.wire.json_grammar = value

    @property
    def tokenizer(self) -> str | None:
        """``"tiktoken <encoding>"`` (e.g. ``"tiktoken o200k_base"``) for OpenAI's own models.

        Only OpenAI and Azure OpenAI count (other servers serve other models), only with
        tiktoken installed (``glassagent[openai-tokens]``), and not once its encoding failed
        to load; otherwise `None`.
        """
        if self.provider_name not in tiktoken_count.PROVIDERS:
            return None
        name = tiktoken_count.encoding_name(self.model)
        return None if name is None else f"tiktoken {name}"

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """The tokens of each text by tiktoken's encoding of `model` (see `tokenizer`).

        A model tiktoken does not know (a new one, or an Azure deployment named otherwise)
        gets ``o200k_base``. tiktoken downloads an encoding the first time it is used: it is
        loaded once per process, in a thread, and the first count waits for it up to 10
        seconds. `None` when there is no tokenizer (see `tokenizer`) or the encoding cannot
        be had; the failure of a load is remembered, not retried.

        Args:
            texts: The texts to count.
        """
        if self.provider_name not in tiktoken_count.PROVIDERS:
            return None
        return await tiktoken_count.count_tokens(self.model, texts)

    async def _body(
        self, request: ModelRequest, *, stream: bool, limits: CallLimits
    ) -> tuple[dict[str, Any], bool]:
        """The body, and whether the reply is read by the JSON tool protocol (it has tools)."""
        body = self.wire.request_body(self.model, request, stream=stream)
        return body, self.wire.json_tools and bool(request.tools)

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``response_format`` with a ``json_schema``) unless the run has tools.

        With tools, only OpenAI itself takes the schema too; other servers (llama.cpp's among
        them) and the JSON tool protocol get the final-answer tool (``tool``).

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        if not tools:
            return "native"
        return (
            "native"
            if self.provider_name == "openai" and self.tool_protocol == "native"
            else "tool"
        )
