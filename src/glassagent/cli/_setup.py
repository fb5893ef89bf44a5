"""What a session starts from: keys from ``.env``, the model client, the workspace, the history.

Everything here is checked before anything runs or is written: a mistake is a `BadInput`
(one line on standard error, exit code 2).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glassagent import BaseLLMClient, Budget, Message, ModelSettings, Tool, Usage
from glassagent.agent import estimate_tokens
from glassagent.errors import ConfigurationError, GlassAgentError, UserError
from glassagent.history import AttachmentPolicy, History
from glassagent.llm import create_llm_client
from glassagent.profiles import client_cost

if TYPE_CHECKING:
    from glassagent.local import WarmServer

LOCAL = "local"
"""The provider name of the embedded local model (`glassagent.local`)."""

LOCAL_CONTEXT_SIZE = 8192
"""Context window of the embedded local model in the CLI, in tokens."""

LOCAL_SETTINGS = ModelSettings(temperature=0)
"""The small local model is steadier without sampling noise."""

Note = Callable[[str], None]


class BadInput(Exception):
    """An option, file or key that cannot work: one line on standard error, exit code 2."""


def read_dotenv(folder: Path, note: Note) -> None:
    """Load ``folder/.env`` into the environment (set variables win); values are never shown."""
    path = folder / ".env"
    if not path.is_file():
        return
    try:
        from dotenv import load_dotenv
    except ImportError:
        note(f"{path} was not read: reading .env files needs `pip install 'glassagent[cli]'`")
        return
    load_dotenv(path, override=False)


def choose_provider(environ: Mapping[str, str], *, genai_installed: bool) -> tuple[str, str]:
    """The provider to use when none is given, and why: Gemini with a key, else local."""
    has_key = bool(environ.get("GEMINI_API_KEY", "").strip())
    if has_key and genai_installed:
        return "gemini", "GEMINI_API_KEY is set"
    if has_key:
        return LOCAL, "GEMINI_API_KEY is set but google-genai is not installed"
    return LOCAL, "GEMINI_API_KEY is not set"


def genai_installed() -> bool:
    """Whether the ``gemini`` extra (google-genai) can be imported."""
    try:
        return importlib.util.find_spec("google.genai") is not None
    except ImportError:  # no `google` package at all
        return False


def provider_of(requested: str | None, note: Note) -> str:
    """The provider's name: the one asked for, or the default (saying which, and why)."""
    if requested is not None:
        name = requested.strip().lower()
        if not name:
            raise BadInput("--provider needs a name")
        return name
    name, why = choose_provider(os.environ, genai_installed=genai_installed())
    note(f"using the {name} provider ({why}; choose another with --provider)")
    return name


@asynccontextmanager
async def open_client(
    provider: str,
    model: str | None,
    base_url: str | None,
    note: Note,
    client_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[BaseLLMClient]:
    """The model client of `provider`, closed (and a local server stopped) on exit.

    `client_options` are further keyword arguments of the client (e.g. ``tool_protocol``).

    Raises:
        BadInput: For an unknown provider, a missing key or another bad configuration.
    """
    if provider == LOCAL:
        async with _local_client(model, base_url, note, client_options or {}) as local:
            yield local
        return
    options: dict[str, Any] = {} if base_url is None else {"base_url": base_url}
    options.update(client_options or {})
    try:
        client = create_llm_client(provider, model=model, **options)
    except ConfigurationError as exc:
        unknown = str(exc).startswith("Unknown provider")
        raise BadInput(f"{exc}{' The CLI also knows: local.' if unknown else ''}") from exc
    except TypeError as exc:  # a plugin's factory without `base_url` (or `model`)
        raise BadInput(f"the {provider} provider does not take these options: {exc}") from exc
    async with client:
        yield client


def check_local(model: str | None, base_url: str | None) -> None:
    """Check the local provider's options before anything starts.

    Raises:
        BadInput: For a ``--base-url``, or a ``--model`` that is not a file.
    """
    if base_url is not None:
        raise BadInput("the local provider runs its own server: --base-url does not apply")
    if model is not None and not Path(model).is_file():
        raise BadInput(f"the local provider's --model must be a GGUF file; {model!r} is not a file")


@asynccontextmanager
async def _local_client(
    model: str | None, base_url: str | None, note: Note, options: Mapping[str, Any]
) -> AsyncIterator[BaseLLMClient]:
    """The embedded local model: the warm server the commands share, or one of its own.

    The warm server (`glassagent.local.WarmServer`) keeps running for
    ``$GLASSAGENT_LOCAL_KEEP_ALIVE`` seconds (600 unless set) after the command; with ``0``,
    or where it cannot be used, the command starts its own server and stops it at its end.
    """
    check_local(model, base_url)
    try:
        from glassagent.local import (
            DEFAULT_MODEL,
            LocalServer,
            WarmServerUnavailable,
            keep_alive_from_env,
        )
    except ImportError as exc:  # pragma: no cover - glassagent.local imports nothing optional
        raise BadInput(f"the local provider cannot be loaded: {exc}") from exc
    try:
        keep_alive = keep_alive_from_env()
    except UserError as exc:
        raise BadInput(str(exc)) from exc
    name = Path(model).name if model else f"{DEFAULT_MODEL.name}, fetched once when missing"
    if keep_alive > 0:
        try:
            warm = await _open_warm(model, keep_alive, name, note)
        except WarmServerUnavailable as exc:
            note(f"not keeping the local model running between commands: {exc}")
        else:
            try:
                async with warm.client(**options) as client:
                    yield client
            finally:
                warm.close()
            return
    note(f"starting the embedded local model ({name})")
    server = LocalServer(model, context_size=LOCAL_CONTEXT_SIZE)
    try:
        await server.astart()
    except ConfigurationError as exc:  # the extra is missing, or a bad model file
        raise BadInput(str(exc)) from exc
    try:
        async with server.client(**options) as client:
            yield client
    finally:
        await server.astop()


async def _open_warm(model: str | None, keep_alive: float, name: str, note: Note) -> WarmServer:
    """The warm local model server, reused or started (saying which), with a lease held.

    Raises:
        WarmServerUnavailable: It cannot be used here (the caller starts a server of its own).
        BadInput: The ``local`` extra is missing, or a bad model file.
    """
    from glassagent.local import KEEP_ALIVE_ENV, WarmServer

    note(f"opening the embedded local model ({name})")
    warm = WarmServer(model, context_size=LOCAL_CONTEXT_SIZE, keep_alive=keep_alive)
    try:
        await warm.open()
    except ConfigurationError as exc:
        raise BadInput(str(exc)) from exc
    if warm.reused:
        note(f"reusing the running local model server (pid {warm.pid})")
    else:
        minutes = f"{keep_alive / 60:g} min" if keep_alive >= 60 else f"{keep_alive:g} s"
        note(
            f"started a local model server (pid {warm.pid}); it keeps running until unused "
            f"for {minutes} ({KEEP_ALIVE_ENV}=0: stop it with each command)"
        )
    return warm


def settings_for(provider: str) -> ModelSettings | None:
    """Generation settings the CLI gives a provider (`None`: the provider's own defaults)."""
    return LOCAL_SETTINGS if provider == LOCAL else None


def check_first_call(
    max_tokens: int | None, system: str, tools: Sequence[Tool], messages: Sequence[Message]
) -> None:
    """Refuse ``--max-turn-tokens`` that the turn's first prompt alone would pass.

    The prompt is estimated as the agent estimates it (system prompt, tool definitions,
    conversation), so a turn that could only be stopped before its first call is refused
    before the model is started or anything is run.

    Raises:
        BadInput: When the first call's prompt is over `max_tokens`.
    """
    if max_tokens is None:
        return
    tokens = estimate_tokens(messages, [tool.definition for tool in tools], system)
    if tokens > max_tokens:
        raise BadInput(
            f"--max-turn-tokens {max_tokens} is less than the first model call's prompt alone "
            f"(about {tokens} tokens of instructions, tool definitions and conversation): "
            "nothing was run"
        )


def budget_for(
    max_cost: Decimal | None, max_tokens: int | None, client: BaseLLMClient
) -> Budget | None:
    """The `Budget` of ``--max-cost`` and ``--max-turn-tokens`` (`None` without either).

    ``--max-cost`` is in the currency the model is priced in.

    Raises:
        BadInput: For ``--max-cost`` on a model that cannot be priced.
    """
    if max_cost is None and max_tokens is None:
        return None
    currency = "USD"
    if max_cost is not None:
        usage = Usage(input_tokens=1000, output_tokens=1000)
        try:
            probe = client_cost(client, usage)  # priced as the agent prices it
        except GlassAgentError as exc:  # an invalid profile file
            raise BadInput(str(exc)) from exc
        if probe.amount is None:
            raise BadInput(
                f"--max-cost needs a model with prices, and {client.model!r} has none "
                f"({probe.reason}): add pricing to its profile, or use --max-turn-tokens"
            )
        currency = probe.currency
    return Budget(max_cost=max_cost, max_tokens=max_tokens, currency=currency)


def check_workspace(folder: Path) -> Path:
    """The workspace folder, absolute.

    Raises:
        BadInput: When it does not exist or is not a folder.
    """
    if not folder.exists():
        raise BadInput(f"the workspace {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise BadInput(f"the workspace {str(folder)!r} is not a folder")
    return folder.resolve()


def load_history(path: Path | None) -> History:
    """The conversation to continue: read from `path`, or a new one when it does not exist yet.

    Its attachments may not read local files (`AttachmentPolicy.safe`): a history file can
    come from anyone.

    Raises:
        BadInput: When the file is not a valid history, cannot be read, or its folder does
            not exist (so it could not be saved).
    """
    policy = AttachmentPolicy.safe()
    if path is None:
        return History(platform="glassagent", attachment_policy=policy)
    if not path.exists():
        if not path.parent.is_dir():
            raise BadInput(f"cannot save the history in {str(path)!r}: its folder does not exist")
        return History(platform="glassagent", attachment_policy=policy)
    try:
        history = History.load(path, attachment_policy=policy)
        history.to_messages()  # every message must be usable as model context
    except (GlassAgentError, OSError) as exc:
        problem = " ".join(str(exc).split())
        raise BadInput(f"{str(path)!r} is not a usable history file: {problem}") from exc
    return history
