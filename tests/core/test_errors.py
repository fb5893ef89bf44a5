import pickle

import pytest

from glassagent import errors


def test_every_error_is_under_one_root() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.GlassAgentError)


def test_missing_configuration_and_bad_keys_are_value_errors() -> None:
    assert issubclass(errors.ConfigurationError, ValueError)
    assert issubclass(errors.AuthenticationError, ValueError)
    assert issubclass(errors.AuthenticationError, errors.ProviderError)
    assert not issubclass(errors.UserError, errors.ProviderError)


@pytest.mark.parametrize(
    "error",
    [
        errors.UserError("bad tool"),
        errors.ConfigurationError("set GEMINI_API_KEY"),
        errors.ProviderError("boom", status=500, body="{}", provider="x"),
        errors.AuthenticationError("no", status=401, body="denied", provider="x"),
        errors.RateLimitError("slow down", retry_after=2.5, body="{}", provider="x"),
        errors.ProviderUnavailableError("down", status=503, provider="x"),
        errors.ResponseParseError("garbled", provider="x"),
        errors.ToolError("tool failed"),
        errors.MCPServerError("the server exited", server="notes"),
        errors.MaxIterationsExceeded("too many", max_iterations=3),
        errors.RunAborted("stopped", reason="user"),
        errors.ContextLengthError("too long", estimated_tokens=9, context_length=8, model="m"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_pickle_with_their_context(error: errors.GlassAgentError) -> None:
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert clone.__dict__ == error.__dict__


def test_provider_errors_carry_status_body_and_provider() -> None:
    err = errors.RateLimitError("slow down", retry_after=3.0, body="{}", provider="gemini")
    assert (err.status, err.body, err.provider, err.retry_after) == (429, "{}", "gemini", 3.0)
    assert err.result is None
