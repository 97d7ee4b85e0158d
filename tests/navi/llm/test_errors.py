from __future__ import annotations

import pytest

from navi.llm.errors import (
    EmbeddedUnavailable,
    IncompleteStream,
    LLMError,
    LLMServerError,
    LLMTimeout,
    MalformedToolCall,
    ModelNotFound,
    ServerUnreachable,
    StreamError,
    ThinkingNotSupported,
    ToolsNotSupported,
)

ERRORS: list[tuple[LLMError, bool]] = [
    (ModelNotFound("m", server="the Ollama server at u", how_to_get="Get it."), False),
    (ToolsNotSupported("m"), False),
    (ThinkingNotSupported("m"), False),
    (ServerUnreachable("http://u"), True),
    (LLMTimeout(5, first_chunk=True), True),
    (LLMTimeout(5, first_chunk=False), True),
    (StreamError("boom"), False),
    (IncompleteStream(), True),
    (MalformedToolCall("f", "{"), True),
    (LLMServerError(400, "bad"), False),
    (LLMServerError(429, "busy"), True),
    (LLMServerError(503, "loading"), True),
    (EmbeddedUnavailable("the package llama-cpp-python is not installed"), False),
]


@pytest.mark.parametrize(("error", "retryable"), ERRORS)
def test_every_error_has_a_message_a_kind_and_a_retry_flag(
    error: LLMError, retryable: bool
) -> None:
    assert isinstance(error, LLMError)
    assert error.message == str(error) and len(str(error)) > 20
    assert error.kind and error.kind != "error"
    assert error.retryable is retryable


def test_embedded_unavailable_says_how_to_install() -> None:
    assert "pip install 'navi[embedded]'" in str(EmbeddedUnavailable("x"))


def test_malformed_tool_call_shortens_long_arguments() -> None:
    error = MalformedToolCall("f", "x" * 1000)
    assert len(str(error)) < 400 and error.raw_arguments == "x" * 1000
