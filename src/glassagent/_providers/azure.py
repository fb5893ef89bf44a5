"""`AzureOpenAIClient`: Azure OpenAI's chat completions, on `OpenAICompatibleClient`.

Azure serves OpenAI's chat-completions wire under its own addresses and credentials: the key
goes in an ``api-key`` header (or a Microsoft Entra ID token in ``Authorization``), and the
URL names the deployment and the API version, or the v1 API. Bodies, streams, retries and
errors are `OpenAICompatibleClient`'s; this module adds the addresses, the credentials and
the typed errors of Azure's content filter.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from glassagent._core.errors import (
    AuthenticationError,
    ConfigurationError,
    ContentBlockedError,
    ProviderError,
)
from glassagent._providers import openai_wire as wire
from glassagent._providers import shapes
from glassagent._providers.config import resolve
from glassagent._providers.http import error_for_status, masked_cause
from glassagent._providers.openai_compat import Connection, OpenAICompatibleClient
from glassagent._providers.transport import HTTPTransport, StatusHook
from glassagent._providers.wire_client import WireReader

if TYPE_CHECKING:
    import httpx

    from glassagent._core.attachments import AttachmentPolicy
    from glassagent._core.messages import LLMResponse, ModelSettings
    from glassagent._core.output import OutputMode
    from glassagent._core.retry import RetryPolicy

__all__ = ["AzureOpenAIClient"]

PROVIDER = "azure_openai"
DEFAULT_API_VERSION = "2024-10-21"
"""The ``api-version`` of deployment paths when none is given: Azure's latest GA version of
the inference API before the v1 API (which takes none)."""
V1_VERSIONS = frozenset({"v1", "preview"})
"""API versions that mean the v1 API (``/openai/v1``): ``v1`` without an ``api-version``,
``preview`` sent as one."""
START_HINT = (
    "Check the endpoint (endpoint=... or AZURE_OPENAI_API_BASE): the resource's address as "
    "the Azure portal shows it under Keys and Endpoint, e.g. https://my-resource.openai.azure.com."
)

TokenProvider = Callable[[], "str | Awaitable[str]"]
"""A function returning a Microsoft Entra ID token, or an awaitable of one."""


class AzureOpenAIClient(OpenAICompatibleClient):
    """A client for a model deployment on Azure OpenAI (Azure AI Foundry), over raw httpx.

    It is an `OpenAICompatibleClient` (same bodies, streaming, tools, retries and errors)
    with Azure's addresses and credentials. By default each request goes to the deployment
    path, ``{endpoint}/openai/deployments/{model}/chat/completions?api-version=...``; with
    ``api_version="v1"`` it goes to the v1 API, ``{endpoint}/openai/v1/chat/completions``,
    which takes the deployment's name as the body's ``model``. An answer Azure's content
    filter cut short keeps its text with ``stop_reason="content_filter"``; one it withheld
    entirely, or a prompt it refused (HTTP 400, code ``content_filter``), raises
    `ContentBlockedError` naming the categories it flagged. The filter's annotations
    (``prompt_filter_results``, ``content_filter_results``) stay in the answer's
    ``raw_response``.

    Args:
        model: The deployment's name, which need not be the model's: the one the Azure
            portal lists under Deployments (the ``model`` of the openai SDK's
            ``AzureOpenAI``). Profiles and prices are looked up by it.
        endpoint: The resource's endpoint, e.g. ``https://my-resource.openai.azure.com``; a
            trailing ``/openai`` or ``/openai/v1`` (the v1 API) is understood. Defaults to
            ``AZURE_OPENAI_API_BASE``, then ``AZURE_OPENAI_ENDPOINT``.
        base_url: Another name for `endpoint`, as the other clients and
            `create_llm_client` call it.
        api_key: Sent in the ``api-key`` header (surrounding white space removed).
            Defaults to ``AZURE_OPENAI_API_KEY``, also for an endpoint given here (every
            endpoint is taken to be Azure's). Not together with `azure_ad_token_provider`.
        api_version: A dated version for the deployment path, e.g. ``"2024-10-21"`` or
            ``"2025-04-01-preview"``; or ``"v1"`` for the v1 API (``"preview"`` goes there
            too, sent as its ``api-version``). Defaults to
            ``AZURE_OPENAI_API_VERSION``, then ``OPENAI_API_VERSION``, then ``"v1"`` for an
            endpoint ending in ``/openai/v1``, else ``"2024-10-21"`` (Azure's last dated GA
            version).
        azure_ad_token_provider: A function, sync or async, returning a Microsoft Entra ID
            token, e.g. ``azure.identity.get_bearer_token_provider(DefaultAzureCredential(),
            "https://cognitiveservices.azure.com/.default")``. It is called before each
            request and its token sent as ``Authorization: Bearer``, never kept, logged or
            shown; a sync one runs in a worker thread, so that a refresh does not block the
            event loop. Without it, no key is read from the environment.
        http_client: As for `OpenAICompatibleClient`.
        max_connections: As for `OpenAICompatibleClient`.
        tool_protocol: As for `OpenAICompatibleClient`.
        json_grammar: As for `OpenAICompatibleClient`.
        retry: As for `OpenAICompatibleClient`.
        attachment_policy: As for `OpenAICompatibleClient`.
        record_wire: As for `OpenAICompatibleClient`.
        fast_pool: As for `OpenAICompatibleClient`.

    Raises:
        ConfigurationError: Without an endpoint, without a key or token provider, with both
            a key and a token provider, with two different endpoints, for a dated version
            with a v1 endpoint, or for options `OpenAICompatibleClient` refuses.
    """

    def __init__(
        self,
        model: str,
        *,
        endpoint: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_version: str | None = None,
        azure_ad_token_provider: Callable[[], str | Awaitable[str]] | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int | None = None,
        tool_protocol: Literal["native", "json"] = "native",
        json_grammar: bool = False,
        retry: RetryPolicy | None = None,
        attachment_policy: AttachmentPolicy | None = None,
        record_wire: bool = False,
        fast_pool: bool | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model must be a deployment's name, not {model!r}.")
        token = _check_credentials(api_key, azure_ad_token_provider)
        config = resolve(
            PROVIDER,
            api_key="" if token else api_key,
            base_url=_one_endpoint(endpoint, base_url),
            api_version=api_version,
        )
        if not config.base_url:
            raise ConfigurationError(
                "Azure OpenAI needs the resource's endpoint: pass "
                "endpoint='https://my-resource.openai.azure.com' or set AZURE_OPENAI_API_BASE."
            )
        if token is None and not config.api_key:
            raise ConfigurationError(
                "Azure OpenAI needs a key or a token: pass api_key=..., set "
                "AZURE_OPENAI_API_KEY, or pass azure_ad_token_provider=... (Microsoft Entra ID)."
            )
        root, version = _address(config.base_url, config.api_version)
        self.endpoint: str = root
        """The resource's endpoint, e.g. ``https://my-resource.openai.azure.com``."""
        self.api_version: str = version
        """The API version: ``v1`` (the v1 API), or a dated one for deployment paths."""
        key = config.api_key or None
        connection = Connection(
            provider=PROVIDER,
            base_url=root + "/openai",
            path=_path(model, version),
            headers={"api-key": key} if key else {},
            secret=key,
            start_hint=START_HINT,
            status_hook=_status_hook(model, key),
            transport=HTTPTransport if token is None else partial(_TokenTransport, token),
        )
        self._setup(
            model,
            connection,
            http_client=http_client,
            max_connections=max_connections,
            tool_protocol=tool_protocol,
            json_grammar=json_grammar,
            retry=retry,
            attachment_policy=attachment_policy,
            record_wire=record_wire,
            fast_pool=fast_pool,
        )

    def output_mode(self, *, tools: bool, settings: ModelSettings) -> OutputMode:
        """``native`` (``response_format`` with a ``json_schema``), with tools too, as on OpenAI.

        The JSON tool protocol gets the final-answer tool (``tool``) when the run has tools.

        Args:
            tools: Whether the run offers tools of its own.
            settings: The run's settings.
        """
        return "native" if not tools or self.tool_protocol == "native" else "tool"

    def _finish(
        self, reader: WireReader, body: dict[str, Any], raw: Any, json_mode: bool
    ) -> LLMResponse:
        """The answer; a withheld one raises `ContentBlockedError` naming what was flagged."""
        try:
            return super()._finish(reader, body, raw, json_mode)
        except ContentBlockedError as exc:
            blocked = exc
        flagged = _answer_flags(raw)
        if flagged:
            blocked = ContentBlockedError(
                f"{blocked} Azure's content filter flagged {', '.join(flagged)}.",
                reason=blocked.reason,
                provider=PROVIDER,
            )
        raise blocked


def _check_credentials(api_key: str | None, provider: TokenProvider | None) -> TokenProvider | None:
    """The token provider, after checking that it is callable and comes without a key."""
    if provider is None:
        return None
    if not callable(provider):
        raise ConfigurationError(
            f"azure_ad_token_provider must be a function returning a token, not "
            f"{type(provider).__name__}."
        )
    if api_key is not None:
        raise ConfigurationError("Pass api_key or azure_ad_token_provider, not both.")
    return provider


def _one_endpoint(endpoint: str | None, base_url: str | None) -> str | None:
    """`endpoint` or `base_url` (two names of one setting; two different values are refused)."""
    if endpoint and base_url and endpoint.strip().rstrip("/") != base_url.strip().rstrip("/"):
        raise ConfigurationError(
            "Pass endpoint or base_url (two names of the same setting), not two addresses."
        )
    return endpoint or base_url


def _address(url: str, api_version: str | None) -> tuple[str, str]:
    """The resource endpoint of `url` and the API version requests use.

    Raises:
        ConfigurationError: For a dated version with a v1 endpoint (``.../openai/v1``).
    """
    says_v1 = url.endswith("/openai/v1")
    root = url.removesuffix("/v1") if says_v1 else url
    root = root.removesuffix("/openai")
    version = api_version or ("v1" if says_v1 else DEFAULT_API_VERSION)
    if says_v1 and version.lower() not in V1_VERSIONS:
        raise ConfigurationError(
            f"The endpoint {url} is the v1 API, which takes no dated api_version "
            f"({version!r}): pass the resource's endpoint ({root}) to use deployment paths, "
            "or api_version='v1'."
        )
    return root, version


def _path(deployment: str, version: str) -> str:
    """The request path under ``{endpoint}/openai``, with its query."""
    if version.lower() in V1_VERSIONS:
        query = "" if version.lower() == "v1" else "?api-version=" + quote(version, safe="")
        return "/v1" + wire.PATH + query
    name = quote(deployment, safe="")
    return f"/deployments/{name}{wire.PATH}?api-version={quote(version, safe='')}"


# ---- Microsoft Entra ID ----------------------------------------------------------------


class _TokenTransport(HTTPTransport):
    """An `HTTPTransport` that sends a fresh Microsoft Entra ID token with each request."""

    def __init__(self, token_provider: TokenProvider, **options: Any) -> None:
        super().__init__(**options)
        self._token_provider = token_provider

    async def _send(  # type: ignore[override]  # the base's is static: it needs no token
        self, client: httpx.AsyncClient, request: httpx.Request
    ) -> httpx.Response:
        request.headers["Authorization"] = f"Bearer {await _token(self._token_provider)}"
        return await HTTPTransport._send(client, request)


async def _token(provider: TokenProvider) -> str:
    """A token from `provider`: awaited if async, else in a worker thread.

    Raises:
        AuthenticationError: When the provider fails or returns no usable token (the
            message never shows what it returned).
    """
    failure: ProviderError | None = None
    try:
        if _is_async(provider):
            value: Any = await provider()  # type: ignore[misc]
        else:
            value = await asyncio.to_thread(provider)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        failure = AuthenticationError(
            f"{PROVIDER}: azure_ad_token_provider failed ({detail}).", provider=PROVIDER
        )
        failure.__cause__ = masked_cause(exc, None)
        failure.__suppress_context__ = True
    if failure is not None:
        raise failure  # outside the handler, so the original is not its __context__
    if not isinstance(value, str) or not value or not value.isprintable() or " " in value:
        raise AuthenticationError(
            f"{PROVIDER}: azure_ad_token_provider returned {shapes.kind(value)}, not a token "
            "(a string without white space).",
            provider=PROVIDER,
        )
    return value


def _is_async(provider: TokenProvider) -> bool:
    """Whether calling `provider` makes a coroutine (an ``async def`` function or method)."""
    call = getattr(provider, "__call__", None)  # noqa: B004 - an object with async __call__
    return inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(call)


# ---- the content filter ----------------------------------------------------------------


def _flagged(results: Any) -> list[str]:
    """What a ``content_filter_result(s)`` object says was filtered: ``violence (high)``..."""
    if not isinstance(results, dict):
        return []
    found = []
    for name, result in results.items():
        if isinstance(result, dict) and result.get("filtered") is True:
            severity = result.get("severity")
            found.append(f"{name} ({severity})" if isinstance(severity, str) else str(name))
    return found


def _answer_flags(raw: Any) -> list[str]:
    """The categories flagged in the ``content_filter_results`` of a body or of chunks."""
    found: list[str] = []
    for chunk in raw if isinstance(raw, list) else [raw]:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict):
                found += _flagged(choice.get("content_filter_results"))
    return list(dict.fromkeys(found))


def _status_hook(deployment: str, secret: str | None) -> StatusHook:
    """Azure's error statuses: a refused prompt, a deployment that does not exist."""

    def hook(status: int, body: str) -> ProviderError | None:
        _, data = shapes.parse_json(body)
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            return None
        code = error.get("code")
        message = shapes.optional_text(error.get("message")) or "no details"
        if code == "content_filter":
            inner = error.get("innererror")
            flagged = _flagged(
                inner.get("content_filter_result") if isinstance(inner, dict) else None
            )
            what = f" (flagged: {', '.join(flagged)})" if flagged else ""
            text = f"Azure's content filter refused the prompt{what}: {message}"
            plain = error_for_status(status, body, provider=PROVIDER, message=text, secret=secret)
            blocked = ContentBlockedError(str(plain), reason="content_filter", provider=PROVIDER)
            blocked.status, blocked.body = plain.status, plain.body
            return blocked
        if status == 404 and code == "DeploymentNotFound":
            text = (
                f"no deployment named {deployment!r} (model=... is the deployment's name, as "
                f"the Azure portal lists it under Deployments): {message}"
            )
            return error_for_status(status, body, provider=PROVIDER, message=text, secret=secret)
        return None

    return hook
