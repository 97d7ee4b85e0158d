"""Navi's LLM backends: Ollama, any OpenAI-compatible server, or an embedded model.

Everything above this package speaks only the neutral types re-exported here.
"""

from navi.llm.base import LLMBackend
from navi.llm.embedded import EmbeddedBackend
from navi.llm.errors import (
    EmbeddedUnavailable,
    IncompleteStream,
    LLMError,
    LLMRedirected,
    LLMServerError,
    LLMTimeout,
    MalformedToolCall,
    ModelNotFound,
    ServerUnreachable,
    StreamError,
    ThinkingNotSupported,
    ToolsNotSupported,
)
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.selection import NoBackendAvailable, resolve_backend, select_backend
from navi.llm.settings import LLMSettings, LLMSettingsError
from navi.llm.stop import StopSignal
from navi.llm.types import (
    ChatMessage,
    Completion,
    FinalChunk,
    LLMOptions,
    ModelInfo,
    StreamChunk,
    TextPiece,
    ThinkingPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)

__all__ = [
    "ChatMessage",
    "Completion",
    "EmbeddedBackend",
    "EmbeddedUnavailable",
    "FinalChunk",
    "IncompleteStream",
    "LLMBackend",
    "LLMError",
    "LLMOptions",
    "LLMRedirected",
    "LLMServerError",
    "LLMSettings",
    "LLMSettingsError",
    "LLMTimeout",
    "MalformedToolCall",
    "ModelInfo",
    "ModelNotFound",
    "NoBackendAvailable",
    "OllamaBackend",
    "OpenAICompatibleBackend",
    "ServerUnreachable",
    "StopSignal",
    "StreamChunk",
    "StreamError",
    "TextPiece",
    "ThinkingNotSupported",
    "ThinkingPiece",
    "ToolCall",
    "ToolCallsChunk",
    "ToolSpec",
    "ToolsNotSupported",
    "resolve_backend",
    "select_backend",
]
