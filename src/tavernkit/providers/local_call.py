"""A :class:`PromptRequest` as the OpenAI-shaped body llama.cpp's server takes (pure: nothing
is loaded). The embedded model (:mod:`~tavernkit.providers.local_llama`) hands this body to
``xllamacpp.Server.handle_chat_completions`` (a :class:`ChatPrompt`, rendered by the GGUF's own
chat template) or ``handle_completions`` (a :class:`TextPrompt`, the text family).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tavernkit.errors import BadRequest
from tavernkit.providers.openai_chat import image_placeholder
from tavernkit.providers.profiles import LOCAL_MODEL_NAME as LOCAL_MODEL_NAME
from tavernkit.providers.request import PromptRequest, TextPrompt, WireImagePart, WireTextPart

__all__ = ["JSON_GBNF", "LOCAL_MODEL_NAME", "SMALL_MODEL_DEFAULTS", "LocalCall", "build_call"]


#: Samplers the 135M model needs to stay coherent, used where the request leaves them unset. A
#: repetition penalty of exactly 1 (SillyTavern's preset default, "off") counts as unset: without
#: a penalty this model loops on one sentence within a few lines; send e.g. 1.0001 to disable it.
SMALL_MODEL_DEFAULTS: dict[str, float] = {
    "temperature": 0.7,
    "top_p": 0.9,
    "repeat_penalty": 1.15,
}

#: Any JSON value (llama.cpp's grammars/json.gbnf): the text family's ``ResponseFormat(None)``.
JSON_GBNF = r"""root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""

# Sampling fields -> llama.cpp server names. tfs and top_a left llama.cpp: reported, not sent.
_SAMPLERS = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("min_p", "min_p"),
    ("typical_p", "typical_p"),
    ("repetition_penalty", "repeat_penalty"),
    ("repetition_penalty_range", "repeat_last_n"),
    ("presence_penalty", "presence_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("seed", "seed"),
)
_BACKEND = (("mirostat_mode", "mirostat"), ("mirostat_tau", "mirostat_tau"))
_BACKEND_SAME = ("mirostat_eta", "dry_multiplier", "dry_base", "xtc_probability")


@dataclass(frozen=True, slots=True)
class LocalCall:
    """One request as a llama.cpp server body.

    ``kind`` picks the handler (``chat``: chat completions through the GGUF's template;
    ``text``: a raw completion of ``body["prompt"]``); ``downgrades`` says what the model could
    not take (images, samplers llama.cpp no longer has), as adapters report in
    ``WireRequest.downgrades``. No seed in ``body`` means a random one per generation.
    """

    kind: Literal["chat", "text"]
    body: dict[str, Any]
    downgrades: tuple[str, ...] = ()


def _sampling(
    request: PromptRequest, default_max_tokens: int, downgrades: list[str]
) -> dict[str, Any]:
    s = request.sampling
    if s.n not in (None, 1):
        raise BadRequest("the local model generates one choice (n=1)", model=LOCAL_MODEL_NAME)
    body: dict[str, Any] = {"max_tokens": s.max_tokens or default_max_tokens}
    for ours, theirs in _SAMPLERS:
        value = getattr(s, ours)
        if value is not None:
            body[theirs] = value
    if body.get("repeat_penalty") == 1:
        del body["repeat_penalty"]
    for key, value in SMALL_MODEL_DEFAULTS.items():
        body.setdefault(key, value)
    for ours, theirs in _BACKEND:
        if s.backend.get(ours) is not None:
            body[theirs] = s.backend[ours]
    for key in _BACKEND_SAME:
        if s.backend.get(key) is not None:
            body[key] = s.backend[key]
    if s.tfs is not None and s.tfs != 1:
        downgrades.append("tail-free sampling (tfs) is not in llama.cpp: ignored")
    if s.logit_bias:
        try:
            body["logit_bias"] = [[int(k), float(v)] for k, v in s.logit_bias.items()]
        except ValueError:
            raise BadRequest(
                "logit_bias keys must be token ids for the local model", model=LOCAL_MODEL_NAME
            ) from None
    if request.stop:
        body["stop"] = list(request.stop)
    return body


def build_call(request: PromptRequest, *, default_max_tokens: int = 512) -> LocalCall:
    """The llama.cpp server body for ``request``: samplers (with the small model's defaults),
    stop strings, and JSON constraints (a JSON schema, any JSON, or a text prompt's GBNF)."""
    downgrades: list[str] = []
    body = _sampling(request, default_max_tokens, downgrades)
    if isinstance(request, TextPrompt):
        body["prompt"] = request.prompt
        if request.grammar:
            body["grammar"] = request.grammar
        elif request.response_format is not None:
            schema = request.response_format.schema
            if schema:
                body["json_schema"] = dict(schema)
            else:
                body["grammar"] = JSON_GBNF
        return LocalCall("text", body, tuple(downgrades))
    if request.tools:
        raise BadRequest(
            "the local model takes no native tools: fold them into the prompt",
            model=LOCAL_MODEL_NAME,
        )
    messages: list[dict[str, str]] = []
    for message in request.messages:
        if isinstance(message.content, str):
            text = message.content
        else:
            pieces: list[str] = []
            for part in message.content:
                if isinstance(part, WireTextPart):
                    pieces.append(part.text)
                elif isinstance(part, WireImagePart):
                    downgrades.append("image replaced by a text placeholder")
                    pieces.append(image_placeholder(part))
            text = "\n".join(pieces)
        messages.append({"role": message.role, "content": text})
    body["messages"] = messages
    if request.response_format is not None:
        schema = request.response_format.schema
        body["response_format"] = (
            {"type": "json_schema", "json_schema": {"schema": dict(schema)}}
            if schema
            else {"type": "json_object"}
        )
    return LocalCall("chat", body, tuple(downgrades))
