"""The application's facts for the tools of a server's runs: ``create_app(host=...)``.

They are keys of the design's context dict (`SEED_KEYS`): the application gives its own
(`APP_FACTS`), the server adds its port and each turn's chat, and each run the rest.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from glassagent._core.errors import ConfigurationError
from glassagent._tools.context import SEED_KEYS

APP_FACTS = ("app_path", "chat_path", "history_path", "main_port", "debug_mode")
"""The keys an application may give `create_app`'s ``host``."""

SERVER_FACTS = ("chat_id", "chat_manager")
"""The keys the server sets for each turn: the chat and the store it is kept in."""

_PATHS = ("app_path", "chat_path", "history_path")


def check_host_facts(host: object) -> dict[str, Any]:
    """`host` checked and normalised: paths as strings, the port as a string of digits.

    A key whose value is `None` is left out (not given).

    Raises:
        ConfigurationError: For a `host` that is not a mapping, a key that is not one of
            `APP_FACTS` (naming the close one, if any), or a value of the wrong type.
    """
    if not isinstance(host, Mapping):
        raise ConfigurationError(f"`host` must be a mapping, not {type(host).__name__}.")
    checked: dict[str, Any] = {}
    for key, value in host.items():
        _check_key(key)
        if value is not None:
            checked[key] = _value(key, value)
    return checked


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise ConfigurationError(f"`host` keys must be strings, got {type(key).__name__}.")
    if key in APP_FACTS:
        return
    if key in SERVER_FACTS:
        raise ConfigurationError(
            f"host[{key!r}]: {key!r} is set by the server for each turn (the request's chat "
            "and the store it is kept in); give `store=` instead."
        )
    if key in SEED_KEYS:
        raise ConfigurationError(
            f"host[{key!r}]: {key!r} is set by each run (its model, settings, tools and "
            "abort signal), not by the application."
        )
    close = difflib.get_close_matches(key, APP_FACTS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise ConfigurationError(
        f"host[{key!r}]: {key!r} is not a host fact an application gives; the keys are "
        f"{', '.join(APP_FACTS)}{hint}"
    )


def _value(key: str, value: object) -> Any:
    if key in _PATHS:
        if isinstance(value, str | os.PathLike):
            text = os.fspath(value)
            if isinstance(text, str) and text:
                return text
        raise ConfigurationError(
            f"host[{key!r}] must be a path (a non-empty str or os.PathLike), "
            f"got {type(value).__name__}."
        )
    if key == "debug_mode":
        if not isinstance(value, bool):
            raise ConfigurationError(
                f"host['debug_mode'] must be a bool, got {type(value).__name__}."
            )
        return value
    # main_port
    port = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(port, str) and port.isascii() and port.isdigit() and 0 < int(port) < 65536:
        return str(int(port))
    raise ConfigurationError(
        f"host['main_port'] must be a port number (1 to 65535, an int or a string of digits), "
        f"got {value!r}."
    )
