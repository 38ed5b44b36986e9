"""OpenAI-style text completions (``POST /v1/completions``): the text family's HTTP API.

Two body layouts:

- ``dialect="openai"``: the plain OpenAI fields (OpenAI, vLLM, llama.cpp, OpenRouter);
- ``dialect="textgen"``: the body SillyTavern sends to its text-generation backends
  (KoboldCpp, text-generation-webui, TabbyAPI, llama.cpp …): every backend's name for each
  sampler side by side (``repetition_penalty`` / ``rep_pen`` / ``repeat_penalty``,
  ``max_new_tokens`` / ``max_tokens`` / ``n_predict``…), so any of them reads what it knows.
  The layout is the one SillyTavern 1.18 sent to KoboldCpp (checked key for key against the
  recorded conformance bodies); SillyTavern trims it a little for some other backends, which
  is not reproduced — they ignore unknown keys.

Responses parse exactly like chat chunks with the text on the choice (``choices[].text``),
plus the reasoning fields of OpenRouter (``choices[].reasoning``) and Ollama (``thinking``).
JSON-schema output uses the backend's grammar support (``json_schema``) in the textgen dialect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from tavernkit.errors import BadRequest
from tavernkit.providers.base import ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.events import StreamEvent
from tavernkit.providers.openai_chat import (
    OpenAIChatAdapter,
    OpenAIChatStreamParser,
    chunk_events,
)
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest, Sampling, TextPrompt
from tavernkit.providers.st_samplers import dry_sequence_breakers

__all__ = ["OpenAITextAdapter", "textgen_body"]

TextDialect = Literal["openai", "textgen"]


class _TextStreamParser(OpenAIChatStreamParser):
    key = "text"


def _parse_banned(text: str) -> tuple[list[int], list[str]]:
    """SillyTavern's banned-tokens box: one entry per line, ``"quoted"`` = a banned string,
    ``[1, 2]`` = token ids (plain words would need the backend's tokenizer: skipped)."""
    ids: list[int] = []
    strings: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if len(line) >= 2 and line[0] == '"' and line[-1] == '"':
            strings.append(line[1:-1])
        elif line.startswith("[") and line.endswith("]"):
            for piece in line[1:-1].split(","):
                if piece.strip().lstrip("-").isdigit():
                    ids.append(int(piece))
    return ids, strings


def textgen_body(
    prompt: str,
    stop: list[str],
    s: Sampling,
    *,
    stream: bool,
    schema: Any = None,
    grammar: str | None = None,
) -> dict[str, Any]:
    """The text-generation body SillyTavern sends (see the module docstring)."""
    b = s.backend

    def get(key: str, default: Any) -> Any:
        value = b.get(key, default)
        return default if value is None else value

    max_tokens = s.max_tokens if s.max_tokens is not None else get("genamt", 200)
    context = s.context_size if s.context_size is not None else 4096
    rep_pen = s.repetition_penalty if s.repetition_penalty is not None else 1.1
    rep_range = s.repetition_penalty_range if s.repetition_penalty_range is not None else 0
    typical = s.typical_p if s.typical_p is not None else 1
    mirostat = get("mirostat_mode", 0)
    ban_eos = get("ban_eos_token", False)
    nsigma = get("nsigma", 0)
    ids, strings = _parse_banned(str(get("banned_tokens", "")))
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_new_tokens": max_tokens,
        "max_tokens": max_tokens,
        "temperature": s.temperature if s.temperature is not None else 1,
        "top_p": s.top_p if s.top_p is not None else 1,
        "typical_p": typical,
        "typical": typical,
        "min_p": s.min_p if s.min_p is not None else 0,
        "repetition_penalty": rep_pen,
        "frequency_penalty": s.frequency_penalty if s.frequency_penalty is not None else 0,
        "presence_penalty": s.presence_penalty if s.presence_penalty is not None else 0,
        "top_k": s.top_k if s.top_k is not None else 0,
        "skew": get("skew", 0),
        "min_tokens": get("min_length", 0),
        "add_bos_token": get("add_bos_token", True),
        "smoothing_factor": get("smoothing_factor", 0),
        "smoothing_curve": get("smoothing_curve", 1),
        "dry_allowed_length": get("dry_allowed_length", 2),
        "dry_multiplier": get("dry_multiplier", 0),
        "dry_base": get("dry_base", 1.75),
        "dry_sequence_breakers": dry_sequence_breakers(
            get("dry_sequence_breakers", '["\\n", ":", "\\"", "*"]')
        ),
        "dry_penalty_last_n": get("dry_penalty_last_n", 0),
        "max_tokens_second": get("max_tokens_second", 0),
        "stopping_strings": stop,
        "stop": list(stop),
        "truncation_length": context,
        "ban_eos_token": ban_eos,
        "skip_special_tokens": get("skip_special_tokens", True),
        "include_reasoning": get("include_reasoning", True),
        "top_a": s.top_a if s.top_a is not None else 0,
        "tfs": s.tfs if s.tfs is not None else 1,
        "mirostat_mode": mirostat,
        "mirostat_tau": get("mirostat_tau", 5),
        "mirostat_eta": get("mirostat_eta", 0.1),
        "custom_token_bans": ",".join(str(i) for i in ids),
        "banned_strings": strings,
        "api_type": get("type", "koboldcpp"),
        "api_server": _server_url(b),
        "sampler_order": list(get("sampler_order", [6, 0, 1, 3, 4, 2, 5])),
        "xtc_threshold": get("xtc_threshold", 0.1),
        "xtc_probability": get("xtc_probability", 0),
        "nsigma": nsigma,
        "top_n_sigma": nsigma,
        "min_keep": get("min_keep", 0),
        "adaptive_target": get("adaptive_target", -0.01),
        "adaptive_decay": get("adaptive_decay", 0.9),
        "trim_stop": True,
        "rep_pen": rep_pen,
        "rep_pen_range": rep_range,
        "repetition_penalty_range": rep_range,
        "guidance_scale": get("guidance_scale", 1),
        "negative_prompt": get("negative_prompt", ""),
        "repeat_penalty": rep_pen,
        "repeat_last_n": rep_range,
        "n_predict": max_tokens,
        "num_predict": max_tokens,
        "num_ctx": context,
        "mirostat": mirostat,
        "ignore_eos": ban_eos,
        "rep_pen_slope": get("rep_pen_slope", 1),
    }
    if stream:
        body["stream"] = True
    if s.seed is not None:
        body["seed"] = s.seed
    grammar = grammar or get("grammar_string", "") or None
    if grammar:
        body["grammar"] = grammar
        body["grammar_string"] = grammar
    if schema is None:
        schema = b.get("json_schema")
    if schema:
        body["json_schema"] = schema
    body.update(s.extra_body)
    return body


def _server_url(backend: Mapping[str, Any]) -> str:
    urls = backend.get("server_urls")
    kind = backend.get("type", "koboldcpp")
    if isinstance(urls, Mapping) and isinstance(urls.get(kind), str):
        return str(urls[kind])
    return str(backend.get("api_server", ""))


class OpenAITextAdapter(OpenAIChatAdapter):
    """``POST /completions`` in the ``openai`` or ``textgen`` layout."""

    name: ClassVar[str] = "openai_text"
    path: ClassVar[str] = "/completions"

    def __init__(self, *, dialect: TextDialect = "openai", stream_usage: bool = False) -> None:
        super().__init__(stream_usage=stream_usage)
        self.dialect: TextDialect = dialect

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, TextPrompt):
            raise BadRequest("the completions API needs a text prompt", model=model)
        s = request.sampling
        schema = request.response_format.schema if request.response_format else None
        if request.response_format is not None and schema is None:
            schema = {"type": "object"}
        if self.dialect == "textgen":
            body = textgen_body(
                request.prompt,
                list(request.stop),
                s,
                stream=stream,
                schema=schema,
                grammar=request.grammar,
            )
            if model:
                body["model"] = model
            return WireRequest("POST", self.path, body, stream=stream)
        body = {"model": model, "prompt": request.prompt} if model else {"prompt": request.prompt}
        for key, value in (
            ("max_tokens", s.max_tokens),
            ("temperature", s.temperature),
            ("top_p", s.top_p),
            ("presence_penalty", s.presence_penalty),
            ("frequency_penalty", s.frequency_penalty),
            ("seed", s.seed),
            ("n", s.n),
        ):
            if value is not None:
                body[key] = value
        if s.logit_bias:
            body["logit_bias"] = dict(s.logit_bias)
        if request.stop:
            body["stop"] = list(request.stop)
        body["stream"] = stream
        if stream and self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(s.extra_body)
        return WireRequest("POST", self.path, body, stream=stream)

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        chunk_events(load_json(body, ctx), "text", ctx, out)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return _TextStreamParser(ctx)
