"""Finding profiles: glassagent's own, plugins', ``GLASSAGENT_PROFILE_PATH`` and ``profile_dirs=``.

Everything is read on the first lookup, not at import, and kept for the process; a lookup
after that is a dictionary access. `reload_profiles` forgets what was read.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pydantic import ValidationError

from glassagent._core.errors import ConfigurationError
from glassagent._profiles.model import ModelProfile, profile_file_name

if TYPE_CHECKING:
    from importlib.abc import Traversable

PROFILE_PATH_ENV = "GLASSAGENT_PROFILE_PATH"
"""The environment variable naming profile directories, separated by `os.pathsep`."""

ENTRY_POINT_GROUP = "glassagent.profiles"
"""The entry-point group in which installed packages ship profiles."""

ProfileDirs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""One directory of profile files, or several (the first winning over the later)."""

_lock = threading.RLock()
_base: tuple[ModelProfile, ...] | None = None  # shipped, then plugins: lowest precedence first
_directories: dict[str, tuple[ModelProfile, ...]] = {}
_indexes: dict[tuple[str, tuple[str, ...]], _Index] = {}


@dataclass(frozen=True)
class _Index:
    by_name: Mapping[str, tuple[ModelProfile, ...]]  # id or alias -> highest precedence first
    profiles: tuple[ModelProfile, ...]


def load_profile(path: str | os.PathLike[str]) -> ModelProfile:
    """Read and validate one profile file.

    Args:
        path: The file; its name must be `profile_file_name` of the id it holds.

    Raises:
        ConfigurationError: When the file cannot be read, is not valid JSON, does not match
            the profile format (the message names the file and each bad field), or its name
            does not match its ``basic_info.id``.
    """
    return _read_file(Path(path), os.fspath(path))


def _read_file(file: Traversable, label: str) -> ModelProfile:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"Model profile {label} cannot be read: {exc}") from exc
    try:
        profile = ModelProfile.model_validate_json(data)
    except ValidationError as exc:
        raise ConfigurationError(_describe(label, exc)) from exc
    stem = file.name.removesuffix(".json")
    if unquote(stem) != profile.id:
        raise ConfigurationError(
            f"Model profile {label}: its file name does not match basic_info.id "
            f"{profile.id!r}; name the file {profile_file_name(profile.id)!r}."
        )
    profile._origin = label
    return profile


def _describe(label: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        field = ".".join(str(part) for part in item["loc"])
        problems.append(f"{field}: {item['msg']}" if field else item["msg"])
    return f"Model profile {label} is invalid: " + "; ".join(problems)


def _read_directory(directory: Traversable, label: str) -> tuple[ModelProfile, ...]:
    """The profiles of a directory's ``*.json`` files, in name order (dot files skipped)."""
    try:
        entries = sorted(directory.iterdir(), key=lambda entry: entry.name)
    except OSError as exc:
        raise ConfigurationError(f"Model profile directory {label} cannot be read: {exc}") from exc
    found: dict[str, ModelProfile] = {}
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(".json") or not entry.is_file():
            continue
        profile = _read_file(entry, f"{label}{os.sep}{entry.name}")
        if profile.id in found:
            raise ConfigurationError(
                f"Model profile directory {label} holds two profiles of {profile.id!r}: "
                f"{found[profile.id].origin} and {profile.origin}."
            )
        found[profile.id] = profile
    return tuple(found.values())


def _user_directory(directory: str, origin: str) -> tuple[ModelProfile, ...]:
    path = Path(directory).expanduser()
    key = os.fspath(path.resolve())
    with _lock:
        if key not in _directories:
            if not path.is_dir():
                raise ConfigurationError(
                    f"{origin} names {directory!r}, which is not a directory of model profiles."
                )
            _directories[key] = _read_directory(path, os.fspath(path))
        return _directories[key]


def _shipped() -> tuple[ModelProfile, ...]:
    data = resources.files("glassagent._profiles") / "data"
    return _read_directory(data, str(data))


def _plugins() -> tuple[ModelProfile, ...]:
    """The profiles of installed plugins, the first entry-point name (alphabetically) last."""
    entries = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda entry: entry.name,
        reverse=True,
    )
    return tuple(profile for entry in entries for profile in _plugin_profiles(entry))


def _plugin_profiles(entry: importlib.metadata.EntryPoint) -> tuple[ModelProfile, ...]:
    dist = getattr(entry, "dist", None)
    origin = f"The profile plugin {entry.name!r} ({entry.value}" + (
        f", from {dist.name})" if dist is not None else ")"
    )
    try:
        obj = entry.load()
        if callable(obj) and not isinstance(obj, type):
            obj = obj()
    except Exception as exc:
        raise ConfigurationError(f"{origin} failed to load: {type(exc).__name__}: {exc}") from exc
    if isinstance(obj, ModuleType):
        obj = resources.files(obj)
    if isinstance(obj, (str, os.PathLike)):
        path = Path(obj)
        if not path.is_dir():
            raise ConfigurationError(f"{origin} names {os.fspath(obj)!r}, not a directory.")
        return _read_directory(path, os.fspath(path))
    # a Traversable, e.g. importlib.resources.files(...) / "profiles"
    if hasattr(obj, "iterdir") and not isinstance(obj, type):
        return _read_directory(obj, str(obj))
    if isinstance(obj, Iterable) and not isinstance(obj, (bytes, Mapping)):
        items = list(obj)
        if all(isinstance(item, ModelProfile) for item in items):
            return tuple(_with_origin(item, origin) for item in items)
    raise ConfigurationError(
        f"{origin} gave a {type(obj).__name__}; expected a directory (a path, a package or a "
        "Traversable), ModelProfile objects, or a function returning one of these."
    )


def _with_origin(profile: ModelProfile, origin: str) -> ModelProfile:
    copy = profile.model_copy()
    copy._origin = origin
    return copy


def _dir_list(profile_dirs: ProfileDirs | None) -> tuple[str, ...]:
    if profile_dirs is None:
        return ()
    if isinstance(profile_dirs, (str, os.PathLike)):
        return (os.fspath(profile_dirs),)
    return tuple(os.fspath(directory) for directory in profile_dirs)


def _index(profile_dirs: ProfileDirs | None) -> _Index:
    env = os.environ.get(PROFILE_PATH_ENV, "")
    arguments = _dir_list(profile_dirs)
    key = (env, arguments)
    with _lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = _build(env, arguments)
        return index


def _build(env: str, arguments: tuple[str, ...]) -> _Index:
    """Layers from the lowest precedence to the highest; a later (id, provider) replaces."""
    global _base
    if _base is None:
        _base = _shipped() + _plugins()
    layers = [_base]
    for directory in reversed([d for d in env.split(os.pathsep) if d]):
        layers.append(_user_directory(directory, PROFILE_PATH_ENV))
    for directory in reversed(arguments):
        layers.append(_user_directory(directory, "profile_dirs"))
    effective: dict[tuple[str, str], tuple[int, ModelProfile]] = {}
    rank = 0
    for layer in layers:
        for profile in layer:
            effective[(profile.id, profile.provider.lower())] = (rank, profile)
            rank += 1
    ordered = [profile for _, profile in sorted(effective.values(), key=lambda x: -x[0])]
    by_name: dict[str, list[ModelProfile]] = {}
    for profile in ordered:  # a profile of that id before one that has it as an alias
        by_name.setdefault(profile.id, []).append(profile)
    for profile in ordered:
        for alias in profile.basic_info.aliases:
            by_name.setdefault(alias, []).append(profile)
    return _Index(
        by_name={name: tuple(found) for name, found in by_name.items()},
        profiles=tuple(sorted(ordered, key=lambda p: (p.id, p.provider))),
    )


def get_profile(
    model_id: str, provider: str | None = None, *, profile_dirs: ProfileDirs | None = None
) -> ModelProfile | None:
    """The profile of `model_id` (or of a model that has it as an alias), or ``None``.

    Profiles come from, the later winning over the earlier for the same model and provider:
    glassagent's own; installed plugins (the ``glassagent.profiles`` entry-point group); the
    directories of ``GLASSAGENT_PROFILE_PATH`` (separated by `os.pathsep`, the first
    winning); the directories of `profile_dirs` (the first winning). They are read on the
    first call and kept for the process (`reload_profiles` reads them again).

    Args:
        model_id: The model id, as the client sends it (`BaseLLMClient.model`).
        provider: The provider serving it (`BaseLLMClient.provider_name`). A profile of that
            provider is preferred; without one the model's profile from another provider is
            returned (the same model behind another API, e.g. ``llama3.1:8b`` through an
            ``openai_compatible`` client), the one of highest precedence.
        profile_dirs: Further directories of profile files, overriding all others.

    Raises:
        ConfigurationError: When a profile file or directory is invalid, or a plugin fails to
            load (the message names the file and the field, or the plugin).
    """
    candidates = _index(profile_dirs).by_name.get(model_id, ())
    if provider is not None:
        wanted = provider.lower()
        for profile in candidates:
            if profile.provider.lower() == wanted:
                return profile
    return candidates[0] if candidates else None


def list_profiles(*, profile_dirs: ProfileDirs | None = None) -> tuple[ModelProfile, ...]:
    """Every profile in effect (overridden ones left out), ordered by id, then provider.

    Args:
        profile_dirs: Further directories of profile files, as for `get_profile`.

    Raises:
        ConfigurationError: As for `get_profile`.
    """
    return _index(profile_dirs).profiles


def reload_profiles() -> None:
    """Forget the profiles read so far; the next lookup reads files and plugins again."""
    global _base
    with _lock:
        _base = None
        _directories.clear()
        _indexes.clear()
