"""Finding profiles: shipped, plugins', ``./ai_profile``, the environment, ``profile_dirs=``.

Everything is read on the first lookup, not at import, and kept for the process; a lookup
after that is a dictionary access. The working folder's ``ai_profile`` is looked for once,
at the first lookup: a folder a run's tools write later changes nothing in the process.
`reload_profiles` forgets what was read. An invalid file in a directory is skipped with a
`ProfileWarning`; only a lookup of its own model raises.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pydantic import ValidationError

from glassagent._core.errors import ConfigurationError
from glassagent._core.profiles.model import (
    ModelProfile,
    close_names,
    close_to_missing,
    profile_file_name,
)

if TYPE_CHECKING:
    from importlib.abc import Traversable

PROFILE_PATH_ENV = "GLASSAGENT_PROFILE_PATH"
"""The environment variable naming profile directories, separated by `os.pathsep`."""

ENTRY_POINT_GROUP = "glassagent.profiles"
"""The entry-point group in which installed packages ship profiles."""

AI_PROFILE_DIR = "ai_profile"
"""The folder of an application's own profiles, read when it is in the working folder."""

ProfileDirs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""One directory of profile files, or several (the first winning over the later)."""


class ProfileWarning(UserWarning):
    """An invalid profile file was skipped; the message names the file and each bad field.

    The other profiles still load; `get_profile` of the file's model raises the error, and
    `list_profiles` lists it in `ProfileList.problems`.
    """


@dataclass(frozen=True)
class ProfileProblem:
    """A profile file that was skipped because it is invalid."""

    path: str
    """The file."""
    model_id: str
    """The model the file is for, read from its name (the percent-decoded stem)."""
    message: str
    """What is wrong, naming the file and each bad field (the `ConfigurationError`'s)."""


class ProfileList(tuple[ModelProfile, ...]):
    """The profiles in effect (a tuple), with the files that were skipped in `problems`."""

    problems: tuple[ProfileProblem, ...]
    """The invalid files found, in the order they were read."""

    def __new__(
        cls, profiles: Iterable[ModelProfile] = (), problems: Iterable[ProfileProblem] = ()
    ) -> ProfileList:
        """A tuple of `profiles` that also holds `problems`."""
        self = super().__new__(cls, profiles)
        self.problems = tuple(problems)
        return self


@dataclass(frozen=True)
class _Layer:
    profiles: tuple[ModelProfile, ...] = ()
    problems: tuple[ProfileProblem, ...] = ()

    def __add__(self, other: _Layer) -> _Layer:
        return _Layer(self.profiles + other.profiles, self.problems + other.problems)


_lock = threading.RLock()
_base: _Layer | None = None  # shipped, then plugins: lowest precedence first
_working: str | None = None  # the working folder's ai_profile, "" for none; None: not yet
_directories: dict[str, _Layer] = {}
_indexes: dict[tuple[str, tuple[str, ...], str], _Index] = {}


@dataclass(frozen=True)
class _Index:
    # id or alias -> (layer, profile), highest precedence first
    by_name: Mapping[str, tuple[tuple[int, ModelProfile], ...]]
    problems: Mapping[str, tuple[int, ProfileProblem]]  # model id -> its highest bad file
    profiles: ProfileList


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
    for path, known in close_names(profile).items():
        warnings.warn(
            f"Model profile {label}: unknown key {path!r}, kept as an unknown field; "
            f"did you mean {known!r}?",
            ProfileWarning,
            stacklevel=3,
        )
    return profile


def _describe(label: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        field = ".".join(str(part) for part in item["loc"])
        problem = f"{field}: {item['msg']}" if field else item["msg"]
        if item["type"] == "missing" and item["loc"]:
            close = close_to_missing(str(item["loc"][-1]), item.get("input"))
            problem += f" (the file has {close!r})" if close else ""
        problems.append(problem)
    return f"Model profile {label} is invalid: " + "; ".join(problems)


def _read_directory(directory: Traversable, label: str) -> _Layer:
    """The profiles of a directory's ``*.json`` files, in name order (dot files skipped).

    An invalid file is skipped with a `ProfileWarning` and kept as a `ProfileProblem`.
    """
    try:
        entries = sorted(directory.iterdir(), key=lambda entry: entry.name)
    except OSError as exc:
        raise ConfigurationError(f"Model profile directory {label} cannot be read: {exc}") from exc
    found: dict[str, ModelProfile] = {}
    problems: list[ProfileProblem] = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(".json") or not entry.is_file():
            continue
        path = f"{label}{os.sep}{entry.name}"
        model_id = unquote(entry.name.removesuffix(".json"))
        try:
            profile = _read_file(entry, path)
        except ConfigurationError as exc:
            problems.append(ProfileProblem(path, model_id, exc.message))
            continue
        if profile.id in found:
            message = (
                f"Model profile directory {label} holds two profiles of {profile.id!r}: "
                f"{found[profile.id].origin} and {profile.origin}."
            )
            problems.append(ProfileProblem(path, profile.id, message))
            continue
        found[profile.id] = profile
    for problem in problems:
        warnings.warn(
            f"{problem.message} It is skipped; the other profiles load.",
            ProfileWarning,
            stacklevel=2,
        )
    return _Layer(tuple(found.values()), tuple(problems))


def _user_directory(directory: str, origin: str) -> _Layer:
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


def _shipped() -> _Layer:
    """The profiles glassagent ships: ``data/<provider>/``, then ``data/``.

    A subfolder holds the profile of a model served by another provider than its profile in
    ``data/`` (a directory holds one file per id); ``data/`` comes last, so its profile is
    the one a lookup without a provider finds.
    """
    data = resources.files("glassagent._core.profiles") / "data"
    layer = _Layer()
    for entry in sorted(data.iterdir(), key=lambda entry: entry.name):
        if entry.is_dir() and not entry.name.startswith((".", "_")):
            layer += _read_directory(entry, str(entry))
    return layer + _read_directory(data, str(data))


def _plugins() -> _Layer:
    """The profiles of installed plugins, the first entry-point name (alphabetically) last."""
    entries = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda entry: entry.name,
        reverse=True,
    )
    layer = _Layer()
    for entry in entries:
        layer += _plugin_profiles(entry)
    return layer


def _plugin_profiles(entry: importlib.metadata.EntryPoint) -> _Layer:
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
            return _Layer(tuple(_with_origin(item, origin) for item in items))
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
        profile_dirs = [profile_dirs]
    return tuple(_absolute(os.fspath(directory)) for directory in profile_dirs)


def _absolute(directory: str) -> str:
    """`directory` made absolute, so a relative name means the working folder of the call."""
    return os.path.abspath(os.path.expanduser(directory))


def _working_folder_profiles() -> str:
    """The working folder's ``ai_profile`` folder ("" for none), looked for once (`_lock` held).

    Once, at the first lookup after import or `reload_profiles`: a folder that appears later
    (written by a run's own tools, say) changes no profile, price or limit of the process.
    """
    global _working
    if _working is None:
        try:
            _working = _absolute(AI_PROFILE_DIR) if os.path.isdir(AI_PROFILE_DIR) else ""
        except OSError:  # the working folder was removed
            _working = ""
    return _working


def _index(profile_dirs: ProfileDirs | None) -> _Index:
    env = os.environ.get(PROFILE_PATH_ENV, "")
    env = os.pathsep.join(_absolute(d) for d in env.split(os.pathsep) if d)
    arguments = _dir_list(profile_dirs)
    with _lock:
        working = _working_folder_profiles()
        key = (env, arguments, working)
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = _build(env, arguments, working)
        return index


def _build(env: str, arguments: tuple[str, ...], working: str) -> _Index:
    """Layers from the lowest precedence to the highest; a later (id, provider) replaces."""
    global _base
    if _base is None:
        _base = _shipped() + _plugins()
    layers = [_base]
    if working:
        layers.append(_user_directory(working, f"The working folder's {AI_PROFILE_DIR}"))
    for directory in reversed([d for d in env.split(os.pathsep) if d]):
        layers.append(_user_directory(directory, PROFILE_PATH_ENV))
    for directory in reversed(arguments):
        layers.append(_user_directory(directory, "profile_dirs"))
    effective: dict[tuple[str, str], tuple[int, int, ModelProfile]] = {}
    problems: dict[str, tuple[int, ProfileProblem]] = {}
    rank = 0
    for number, layer in enumerate(layers):
        for profile in layer.profiles:
            effective[(profile.id, profile.provider.lower())] = (rank, number, profile)
            rank += 1
        for problem in layer.problems:
            problems[problem.model_id] = (number, problem)
    ordered = [(number, p) for _, number, p in sorted(effective.values(), key=lambda x: -x[0])]
    by_name: dict[str, list[tuple[int, ModelProfile]]] = {}
    for number, profile in ordered:  # a profile of that id before one that has it as an alias
        by_name.setdefault(profile.id, []).append((number, profile))
    for number, profile in ordered:
        for alias in profile.basic_info.aliases:
            by_name.setdefault(alias, []).append((number, profile))
    return _Index(
        by_name={name: tuple(found) for name, found in by_name.items()},
        problems=problems,
        profiles=ProfileList(
            sorted((p for _, p in ordered), key=lambda p: (p.id, p.provider)),
            (problem for layer in layers for problem in layer.problems),
        ),
    )


def get_profile(
    model_id: str, provider: str | None = None, *, profile_dirs: ProfileDirs | None = None
) -> ModelProfile | None:
    """The profile of `model_id` (or of a model that has it as an alias), or ``None``.

    Profiles come from, the later winning over the earlier for the same model and provider:
    glassagent's own; installed plugins (the ``glassagent.profiles`` entry-point group); the
    ``ai_profile`` folder of the working folder, when there is one at the first lookup (one
    made later is not read until `reload_profiles`); the directories of
    ``GLASSAGENT_PROFILE_PATH`` (separated by `os.pathsep`, the first winning); the
    directories of `profile_dirs` (the first winning). They are read on the first call and
    kept for the process (`reload_profiles` reads them again).

    An invalid file in a directory is skipped with a `ProfileWarning` naming the file and
    the field; the other profiles still load, and only a lookup of its model (the file's
    name) raises, unless a directory of higher precedence has a valid profile of it.

    Args:
        model_id: The model id, as the client sends it (`BaseLLMClient.model`).
        provider: The provider serving it (`BaseLLMClient.provider_name`). A profile of that
            provider is preferred; without one the model's profile from another provider is
            returned (the same model behind another API, e.g. ``llama3.1:8b`` through an
            ``openai_compatible`` client), the one of highest precedence.
        profile_dirs: Further directories of profile files, overriding all others.

    Raises:
        ConfigurationError: When the profile file of `model_id` is invalid (the message names
            the file and the field), a directory is missing or unreadable, or a plugin fails
            to load (the message names it).
    """
    index = _index(profile_dirs)
    candidates = index.by_name.get(model_id, ())
    problem = index.problems.get(model_id)
    if problem is not None and problem[0] >= max((n for n, _ in candidates), default=-1):
        raise ConfigurationError(problem[1].message)
    if provider is not None:
        wanted = provider.lower()
        for _, profile in candidates:
            if profile.provider.lower() == wanted:
                return profile
    return candidates[0][1] if candidates else None


def list_profiles(*, profile_dirs: ProfileDirs | None = None) -> ProfileList:
    """Every profile in effect (overridden ones left out), ordered by id, then provider.

    The result is a tuple; its `ProfileList.problems` are the invalid files that were
    skipped.

    Args:
        profile_dirs: Further directories of profile files, as for `get_profile`.

    Raises:
        ConfigurationError: When a directory is missing or unreadable, or a plugin fails to
            load.
    """
    return _index(profile_dirs).profiles


def reload_profiles() -> None:
    """Forget the profiles read so far; the next lookup reads files and plugins again."""
    global _base, _working
    with _lock:
        _base = None
        _working = None
        _directories.clear()
        _indexes.clear()
