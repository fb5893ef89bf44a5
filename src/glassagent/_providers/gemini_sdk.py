"""The fast route through google-genai: a request body made once per message and per config.

google-genai's ``generate_content`` validates the whole conversation into its pydantic types
and converts it back to JSON on every call, and converts the config (the tool declarations
too) each time: in an agent run, whose conversation grows by a turn or two per call, that is
most of a call's cost. `FastModels` keeps the rest of google-genai: its API client over our
httpx client (key, URL, headers, errors), its continuation hops and its response types. It
takes ``contents`` already in REST form (`gemini_wire.RestContents`, each message converted
once) and a config google-genai converted once (`Route.prepare`), and its two request methods
mirror google-genai's own for the Gemini API.

They rest on google-genai internals, so a client gets a `Route` only for the Gemini API (not
Vertex AI), and only where the internals are all there and the fast route passed its start-up
check: the recorded exchanges of `gemini_check`, sent both ways, must send and read exactly as
google-genai's public route does (checked once per process, on first use; a failure is logged
once, as a warning). Otherwise, and for a config with per-call HTTP options, `GeminiClient`
takes the public ``generate_content``.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, replace
from typing import Any, cast
from urllib.parse import urlencode

import google.genai
from google.genai import models, types
from pydantic import ValidationError

from glassagent._core.errors import ConfigurationError
from glassagent._providers import gemini_check


def _private_module(name: str) -> Any:
    """A private module of google-genai, or `None` where it is gone (see `route`)."""
    try:
        return importlib.import_module(f"google.genai.{name}")
    except ImportError:
        return None


_common = _private_module("_common")
_extra_utils = _private_module("_extra_utils")
logger = logging.getLogger("glassagent")

CONFIGS_KEPT = 8
"""Converted configs each `Route` keeps (the latest); a run uses one."""


@dataclass(frozen=True)
class Converted:
    """A config as google-genai sends it: everything of the body but ``contents``."""

    source: Any
    """What it was made from: the model and a copy of the config dict."""
    model: str
    config: types.GenerateContentConfig | None
    params: types._GenerateContentParameters
    body: dict[str, Any]
    path: str
    stream_path: str
    kwargs: dict[str, Any]
    """What google-genai's response reading is told of the config."""
    afc_history: bool
    """Whether ``generate_content`` gives its answer an (empty) automatic function calling
    history: when that is not turned off, as without function declarations."""


@dataclass(frozen=True)
class Prepared:
    """A request ready for `FastModels`: REST contents and the converted config."""

    contents: list[dict[str, Any]]
    converted: Converted


def _paths(request: dict[str, Any]) -> tuple[str, str]:
    """The generate and stream paths, as google-genai's request methods make them."""
    url = request.get("_url")
    paths = ["{model}:generateContent", "{model}:streamGenerateContent?alt=sse"]
    if url:
        paths = [p.format_map(url) for p in paths]
    query = request.get("_query")
    if query:
        paths = [f"{p}?{urlencode(query)}" for p in paths]
    return paths[0], paths[1]


def convert(api_client: Any, model: str, config: Any) -> Converted:
    """Convert `config` (a dict, a ``GenerateContentConfig`` or `None`) as google-genai does.

    Raises:
        pydantic.ValidationError: When google-genai cannot read the config.
        ValueError: When google-genai refuses it for the Gemini API.
    """
    if isinstance(config, dict):  # as `generate_content` reads it: an empty one is none
        config = types.GenerateContentConfig(**config) if config else None
    params = types._GenerateContentParameters(model=model, config=config)
    request = models._GenerateContentParameters_to_mldev(api_client, params, None, params)
    path, stream_path = _paths(request)
    body = {k: v for k, v in request.items() if k != "config" and not k.startswith("_")}
    body = _common.encode_unserializable_types(_common.convert_to_dict(body))
    kwargs: dict[str, Any] = {}
    if params.config is not None:
        kwargs["config"] = {
            "response_schema": params.config.response_schema,
            "response_json_schema": params.config.response_json_schema,
            "include_all_fields": getattr(params.config, "include_all_fields", None),
        }
    config = params.config
    afc_history = (
        not _extra_utils.should_disable_afc(config)
        and not _extra_utils.find_afc_incompatible_tool_indexes(config)
        and _extra_utils.should_append_afc_history(config)
    )
    return Converted(None, model, config, params, body, path, stream_path, kwargs, afc_history)


class FastModels(models.AsyncModels):
    """google-genai's ``AsyncModels``, its requests given as `Prepared` ``contents``."""

    def _converted(self, contents: Any, config: Any) -> tuple[Converted, dict[str, Any]]:
        prepared = cast(Prepared, contents)
        converted = prepared.converted
        if config is not converted.config:  # a continuation hop: the config has its token
            converted = convert(self._api_client, converted.model, config)
        return converted, {"contents": prepared.contents, **converted.body}

    def _read(self, body: str, headers: Any, converted: Converted) -> types.GenerateContentResponse:
        """One response (or streamed chunk), read as google-genai reads it."""
        response = json.loads(body) if body else {}
        response = models._GenerateContentResponse_from_mldev(response, None, converted.params)
        value = types.GenerateContentResponse._from_response(
            response=response, kwargs=converted.kwargs
        )
        value.sdk_http_response = types.HttpResponse(headers=headers)
        self._api_client._verify_response(value)
        return value

    async def _generate_content(
        self, *, model: str, contents: Any, config: Any = None
    ) -> types.GenerateContentResponse:
        converted, request = self._converted(contents, config)
        response = await self._api_client.async_request("post", converted.path, request, None)
        return self._read(response.body or "", response.headers, converted)

    async def _generate_content_stream(  # type: ignore[override]
        self, *, model: str, contents: Any, config: Any = None
    ) -> AsyncIterator[types.GenerateContentResponse]:
        converted, request = self._converted(contents, config)
        stream = await self._api_client.async_request_streamed(
            "post", converted.stream_path, request, None
        )

        async def chunks() -> AsyncIterator[types.GenerateContentResponse]:
            async for response in stream:
                yield self._read(response.body or "", response.headers, converted)

        return chunks()


class Route:
    """The fast route of one google-genai client: its `FastModels` and converted configs."""

    def __init__(self, sdk: Any) -> None:
        """The route of the google-genai client `sdk` (see `route`)."""
        self.models = FastModels(sdk._api_client)
        self._converted: list[Converted] = []  # the latest first

    def prepare(self, model: str, config: dict[str, Any]) -> Converted | None:
        """`config` converted for `model` (once: later calls find it); `None`: not this route.

        Raises:
            ConfigurationError: When google-genai cannot take the config.
        """
        key = (model, config)
        for converted in self._converted:
            if converted.source == key:  # a copy: a schema changed in place is seen
                return _routable(converted)
        try:
            source = copy.deepcopy(key)
        except Exception:  # live objects (a session, say): google-genai's public route
            return None
        try:
            converted = replace(convert(self.models._api_client, model, config), source=source)
        except ValidationError as exc:
            raise config_error(exc) from None
        except Exception as exc:
            raise ConfigurationError(f"gemini cannot take this config: {exc}") from None
        self._converted = [converted, *self._converted[: CONFIGS_KEPT - 1]]
        return _routable(converted)

    async def generate(self, prepared: Prepared) -> types.GenerateContentResponse:
        """``generateContent`` (with google-genai's continuation hops)."""
        converted = prepared.converted
        response = await self.models._generate_content_with_continuation(
            model=converted.model, contents=cast(Any, prepared), config=converted.config
        )
        if converted.afc_history:
            response.automatic_function_calling_history = []
        return response

    async def generate_stream(self, prepared: Prepared) -> AsyncIterator[Any]:
        """``streamGenerateContent``: its chunks (the request goes out with the first)."""
        return self.models._generate_content_stream_with_continuation(
            model=prepared.converted.model,
            contents=cast(Any, prepared),
            config=prepared.converted.config,
        )


def _routable(converted: Converted) -> Converted | None:
    """`converted`, unless its config asks for what only the public route does."""
    config = converted.config
    if config is not None and (config.http_options or config.should_return_http_response):
        return None
    return converted


def _fast_call(
    sdk: Any, model: str, contents: list[dict[str, Any]], config: dict[str, Any], streamed: bool
) -> Awaitable[Any]:
    """Send a request by the fast route, as `GeminiClient` does (for `gemini_check`)."""
    fast = Route(sdk)
    converted = fast.prepare(model, config)
    if converted is None:
        raise LookupError("the fast route does not take this config")
    prepared = Prepared(contents, converted)
    return fast.generate_stream(prepared) if streamed else fast.generate(prepared)


def _internals(api_client: Any) -> dict[str, Any]:
    """The google-genai internals the fast route calls, by name (`None`: missing)."""
    owners: dict[str, tuple[Any, ...]] = {
        "models": (
            models,
            "_GenerateContentParameters_to_mldev",
            "_GenerateContentResponse_from_mldev",
        ),
        "AsyncModels": (
            getattr(models, "AsyncModels", None),
            "_generate_content_with_continuation",
            "_generate_content_stream_with_continuation",
        ),
        "BaseApiClient": (
            type(api_client),
            "async_request",
            "async_request_streamed",
            "_verify_response",
        ),
        "types": (types, "_GenerateContentParameters"),
        "GenerateContentResponse": (types.GenerateContentResponse, "_from_response"),
        "_common": (_common, "convert_to_dict", "encode_unserializable_types"),
        "_extra_utils": (
            _extra_utils,
            "should_disable_afc",
            "find_afc_incompatible_tool_indexes",
            "should_append_afc_history",
        ),
    }
    return {
        f"{label}.{name}": getattr(owner, name, None)
        for label, (owner, *names) in owners.items()
        for name in names
    }


CHECK_SECONDS = 30.0
"""How long the start-up check may take (it takes about 0.1 s); then the public route."""
_verdicts: dict[tuple[Any, ...], bool] = {}
_verdicts_lock = threading.Lock()


def checked(api_client: Any) -> bool:
    """Whether the fast route sends and reads as the public route (`gemini_check`).

    Checked once per process (per set of google-genai internals), on a thread of its own:
    the check runs its own event loop, so it can be asked from any loop or none. When an
    internal is missing or any case differs, this is logged once, as a warning.
    """
    internals = _internals(api_client)
    key = tuple(internals.values())
    with _verdicts_lock:
        verdict = _verdicts.get(key)
        if verdict is None:
            missing = [name for name, value in internals.items() if value is None]
            found = [f"it has no {', '.join(missing)}"] if missing else _differences()
            verdict = _verdicts[key] = not found
            if found:
                logger.warning(
                    "google-genai %s: GeminiClient takes google-genai's public "
                    "generate_content, not its fast route, which does not match it here: %s",
                    getattr(google.genai, "__version__", "?"),
                    "; ".join(found)[:2000],
                )
    return verdict


def _differences() -> list[str]:
    """`gemini_check.differences` of the fast route, run on a thread and loop of its own."""
    outcome: list[Any] = [f"the check took more than {CHECK_SECONDS:g} s"]

    def run() -> None:
        try:
            outcome[0] = asyncio.run(gemini_check.differences(_fast_call))
        except Exception as exc:  # an internal changed its signature, say
            outcome[0] = f"the check failed: {type(exc).__name__}: {exc}"

    thread = threading.Thread(target=run, name="glassagent-gemini-check", daemon=True)
    thread.start()
    thread.join(CHECK_SECONDS)
    found = outcome[0]
    return found if isinstance(found, list) else [str(found)]


def route(sdk: Any) -> Route | None:
    """The fast route of the google-genai client `sdk`, or `None` where it does not apply.

    It applies to the Gemini API (not Vertex AI), and only where the fast route passes its
    start-up check against google-genai's public route (`checked`).
    """
    try:
        api_client = sdk._api_client
        if api_client.vertexai:
            return None
    except Exception:  # an internal moved: the public route still works
        return None
    return Route(sdk) if checked(api_client) else None


def config_error(exc: ValidationError) -> ConfigurationError:
    """The error for a config google-genai cannot read, naming each field and what it said."""
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return ConfigurationError(f"gemini cannot take these GeminiOptions: {problems[:1000]}.")


def check_config(config: dict[str, Any]) -> None:
    """Refuse a config google-genai cannot read, before anything is sent.

    An unknown `GeminiOptions.extra_config` key, say, would otherwise surface as an answer
    that could not be read. (Unknown enum values pass: google-genai sends them on.)

    Raises:
        ConfigurationError: Naming the provider and what google-genai said.
    """
    try:
        with warnings.catch_warnings():  # google-genai warns again when it sends the request
            warnings.simplefilter("ignore")
            types.GenerateContentConfig.model_validate(config)
    except ValidationError as exc:
        raise config_error(exc) from None
