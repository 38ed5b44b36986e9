"""tavernkit.providers: every wire API behind one typed event stream.

Layers, bottom up: :mod:`~tavernkit.providers.sse` (bytes to SSE events),
:mod:`~tavernkit.providers.events` (the normalized stream), one adapter module per wire API
(JSON/SSE to events, requests out, its own error table),
:mod:`~tavernkit.providers.accumulator` (events to a :class:`Completion`, for streaming and
non-streaming alike), :mod:`~tavernkit.providers.provider` (URL, auth, key, client, timeouts),
:mod:`~tavernkit.providers.profiles` (what a model can do) and
:mod:`~tavernkit.providers.retry` (when the same request may be repeated).
:mod:`~tavernkit.providers.local_llama` is the in-process model with the same interface as
``Provider``; :mod:`~tavernkit.providers.reasoning_stream` splits inline ``<think>`` reasoning.
"""

from __future__ import annotations

from tavernkit.providers.accumulator import (
    Accumulator,
    Completion,
    ReasoningBlock,
    WireToolCall,
    parse_partial_json,
)
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest
from tavernkit.providers.events import (
    Finish,
    FinishReason,
    ProviderErrorEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.http import Timeouts
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.llamacpp import LlamaCppAdapter
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.local_model import find_model_path, pull_model
from tavernkit.providers.novelai import NovelAIAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_responses import OpenAIResponsesAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.profiles import ModelProfile, resolve_model
from tavernkit.providers.provider import Provider
from tavernkit.providers.reasoning_stream import TagReasoningSplitter, split_tag_reasoning
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    PromptRequest,
    ResponseFormat,
    Sampling,
    TextPrompt,
    ToolSpec,
    WireImagePart,
    WireTextPart,
)
from tavernkit.providers.retry import RetryPolicy, call_with_retry
from tavernkit.providers.sse import SSEDecoder, SSEEvent

__all__ = [
    "Accumulator",
    "Adapter",
    "AnthropicAdapter",
    "ChatMessage",
    "ChatPrompt",
    "Completion",
    "ErrorContext",
    "Finish",
    "FinishReason",
    "GeminiAdapter",
    "KoboldAdapter",
    "LlamaCppAdapter",
    "LocalLlamaProvider",
    "ModelProfile",
    "NovelAIAdapter",
    "OpenAIChatAdapter",
    "OpenAIResponsesAdapter",
    "OpenAITextAdapter",
    "PromptRequest",
    "Provider",
    "ProviderErrorEvent",
    "ReasoningBlock",
    "ReasoningDelta",
    "RefusalDelta",
    "ResponseFormat",
    "ResponseMeta",
    "RetryPolicy",
    "SSEDecoder",
    "SSEEvent",
    "Sampling",
    "StreamEvent",
    "StreamParser",
    "TagReasoningSplitter",
    "TextDelta",
    "TextPrompt",
    "Timeouts",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "WireImagePart",
    "WireRequest",
    "WireTextPart",
    "WireToolCall",
    "call_with_retry",
    "find_model_path",
    "parse_partial_json",
    "pull_model",
    "resolve_model",
    "split_tag_reasoning",
]
