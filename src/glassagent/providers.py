"""The provider toolkit: what a new HTTP provider is built from (a stable API).

A provider that speaks JSON over HTTP is one `Wire`: the request body of a `ModelRequest`,
a `WireReader` that reads an answer or a stream event into a `ResponseBuilder`, the
stop-reason map, the path and the stream's framing (server-sent events or JSON lines).
`WireClient` turns it into a full `BaseLLMClient`: the `HTTPTransport` with the call's
deadline, stall timeout and size limit (`CallLimits`), retries by `RetryPolicy`
(`with_retries`), error statuses mapped to `glassagent.errors` (`error_for_status`), the key
masked in every error, repr and recorded body (`mask_key`, `redact`), attachments checked by
`AttachmentPolicy`, and ``record_wire``. The built-in OpenAI-compatible, Azure, Anthropic,
Ollama and llama.cpp clients are made this way.

A reader checks each value where it enters: `text_field`, `object_field` and `object_list`
read a field that carries the answer and raise `ResponseParseError` for a wrong type;
`token_count` and `optional_text` read bookkeeping fields, dropping a malformed value. An
options class checks its fields with `check_number`, `check_integer`, `check_text` and
`check_mapping`; a wire adds pass-through fields with `add_unset`.

Register the client under a provider name with `register_provider`, or from another package
through the ``glassagent.providers`` entry-point group; give it typed options by subclassing
`ProviderOptions`. See the docs page "Write a provider".
"""

from glassagent._core.options import (
    add_unset,
    check_integer,
    check_mapping,
    check_number,
    check_text,
)
from glassagent._core.request import ModelRequest
from glassagent._providers.builder import ResponseBuilder, parse_arguments
from glassagent._providers.call import CallLimits, final_response, with_retries
from glassagent._providers.factory import register_provider
from glassagent._providers.http import error_for_status, mask_key, redact, retry_after_seconds
from glassagent._providers.shapes import (
    object_field,
    object_list,
    optional_text,
    parse_error,
    parse_json,
    text_field,
    token_count,
)
from glassagent._providers.sse import LineSplitter, SSEReader
from glassagent._providers.transport import HTTPTransport, error_message
from glassagent._providers.wire_client import Wire, WireClient, WireReader
from glassagent._public import publish

__all__ = [
    "CallLimits",
    "HTTPTransport",
    "LineSplitter",
    "ModelRequest",
    "ResponseBuilder",
    "SSEReader",
    "Wire",
    "WireClient",
    "WireReader",
    "add_unset",
    "check_integer",
    "check_mapping",
    "check_number",
    "check_text",
    "error_for_status",
    "error_message",
    "final_response",
    "mask_key",
    "object_field",
    "object_list",
    "optional_text",
    "parse_arguments",
    "parse_error",
    "parse_json",
    "redact",
    "register_provider",
    "retry_after_seconds",
    "text_field",
    "token_count",
    "with_retries",
]

# ModelRequest and register_provider are at home in glassagent.llm
publish(__name__, globals(), [n for n in __all__ if n not in ("ModelRequest", "register_provider")])
