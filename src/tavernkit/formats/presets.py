"""Reading and writing SillyTavern's preset and template files.

Eight kinds share the ``.json`` extension and carry no type marker, so the kind is told from the
keys (``preset_kind``); the kind names are SillyTavern's folder names under ``presets/``. Reading
applies the legacy migrations (old chat-completion and instruct keys) and validates; writing is
the model's wire form, so a current file read and written back has the same values in the same
key order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, cast

from pydantic import ValidationError

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import (
    DEFAULT_LIMITS,
    FormatLimits,
    atomic_write_bytes,
    check_text_sizes,
    dump_json,
    load_json,
    read_limited,
    validation_error,
)
from tavernkit.models.base import WireModel
from tavernkit.models.preset import ChatCompletionPreset, migrate_legacy_preset
from tavernkit.models.samplers import KoboldSettings, NovelSettings, TextGenSettings
from tavernkit.models.templates import (
    ContextTemplate,
    InstructTemplate,
    ReasoningTemplate,
    SystemPrompt,
    migrate_legacy_instruct,
)

__all__ = [
    "PRESET_KINDS",
    "AnyPreset",
    "PresetKind",
    "kind_of",
    "preset_kind",
    "preset_to_json",
    "read_preset",
    "read_preset_file",
    "write_preset",
]

PresetKind: TypeAlias = Literal[
    "openai", "instruct", "context", "sysprompt", "reasoning", "textgen", "kobold", "novel"
]

AnyPreset: TypeAlias = (
    ChatCompletionPreset
    | InstructTemplate
    | ContextTemplate
    | SystemPrompt
    | ReasoningTemplate
    | TextGenSettings
    | KoboldSettings
    | NovelSettings
)

#: The model of each kind (the kind is SillyTavern's folder name under ``presets/``).
PRESET_KINDS: Final[Mapping[PresetKind, type[WireModel]]] = {
    "openai": ChatCompletionPreset,
    "instruct": InstructTemplate,
    "context": ContextTemplate,
    "sysprompt": SystemPrompt,
    "reasoning": ReasoningTemplate,
    "textgen": TextGenSettings,
    "kobold": KoboldSettings,
    "novel": NovelSettings,
}

# Keys only a chat-completion preset has (current and pre-prompt-manager ones).
_OPENAI_KEYS: Final = frozenset(
    {
        "prompts",
        "prompt_order",
        "chat_completion_source",
        "main_prompt",
        "nsfw_prompt",
        "jailbreak_prompt",
        "impersonation_prompt",
        "new_chat_prompt",
        "new_example_chat_prompt",
        "continue_nudge_prompt",
        "wi_format",
        "stream_openai",
    }
)
_INSTRUCT_KEYS: Final = frozenset({"input_sequence", "output_sequence", "separator_sequence"})
_REASONING_KEYS: Final = frozenset({"prefix", "suffix", "separator"})
_SYSPROMPT_ONLY: Final = frozenset({"name", "content", "enabled"})
# Sampler keys text-generation-webui style presets have and KoboldAI presets do not.
_TEXTGEN_KEYS: Final = frozenset(
    {
        "typical_p",
        "temperature_last",
        "freq_pen",
        "presence_pen",
        "rep_pen_size",
        "rep_pen_decay",
        "encoder_rep_pen",
        "no_repeat_ngram_size",
        "penalty_alpha",
        "num_beams",
        "length_penalty",
        "mirostat_mode",
        "dynatemp",
        "min_temp",
        "max_temp",
        "dry_multiplier",
        "smoothing_factor",
        "sampler_priority",
        "samplers",
        "ban_eos_token",
        "add_bos_token",
        "skip_special_tokens",
        "grammar_string",
        "banned_tokens",
        "epsilon_cutoff",
        "eta_cutoff",
        "guidance_scale",
        "negative_prompt",
        "do_sample",
        "xtc_threshold",
    }
)
# KoboldAI's own names (``typical``, ``mirostat``, ``grammar``) and its old length keys.
_KOBOLD_KEYS: Final = frozenset(
    {"typical", "mirostat", "use_default_badwordsids", "grammar", "genamt", "sampler_seed"}
)
# NovelAI's key names; its presets never use the ``rep_pen``/``temp`` short names.
_NOVEL_KEYS: Final = frozenset(
    {
        "tail_free_sampling",
        "repetition_penalty_range",
        "repetition_penalty_slope",
        "repetition_penalty_frequency",
        "repetition_penalty_presence",
        "phrase_rep_pen",
        "math1_temp",
        "math1_quad",
        "mirostat_lr",
    }
)


def preset_kind(data: Any) -> PresetKind | None:
    """The kind of preset a parsed JSON value is, told from its keys, or None if it is none.

    The checks go from the most to the least specific: chat-completion presets also carry
    sampler names, instruct templates carry ``story_string_prefix``, NovelAI presets a
    ``prefix``, so each rule looks for keys no earlier kind has.
    """
    if not isinstance(data, Mapping):
        return None
    keys = frozenset(k for k in data if isinstance(k, str))
    if keys & _OPENAI_KEYS or any(k.startswith("openai_") for k in keys):
        return "openai"
    if keys & _INSTRUCT_KEYS:
        return "instruct"
    if "story_string" in keys:
        return "context"
    if keys >= _REASONING_KEYS and "order" not in keys:
        return "reasoning"
    if "content" in keys and ("post_history" in keys or keys <= _SYSPROMPT_ONLY):
        return "sysprompt"
    if "rep_pen" in keys or "temp" in keys:
        if keys & _TEXTGEN_KEYS:
            return "textgen"
        if keys & _KOBOLD_KEYS or "sampler_order" in keys:
            return "kobold"
        return "textgen"
    if keys & _NOVEL_KEYS:
        return "novel"
    return None


def kind_of(preset: AnyPreset) -> PresetKind:
    """The kind name of a preset value (the inverse of :data:`PRESET_KINDS`)."""
    for kind, model in PRESET_KINDS.items():
        if type(preset) is model:
            return kind
    raise TypeError(f"not a preset model: {type(preset).__name__}")


def read_preset(
    data: bytes | str | Mapping[str, Any],
    *,
    source: str = "<bytes>",
    kind: str | None = None,
    limits: FormatLimits = DEFAULT_LIMITS,
) -> AnyPreset:
    """Read a preset or template of any kind from JSON bytes/text or an already parsed mapping.

    ``kind`` (a key of :data:`PRESET_KINDS`) skips detection; otherwise the kind is told from the
    content. Legacy keys are migrated first. Raises :class:`FormatError` naming ``source`` and the
    offending field for anything that is not a valid preset of that kind.
    """
    if kind is not None and kind not in PRESET_KINDS:
        raise FormatError(
            f"unknown preset kind {kind!r} (expected one of {', '.join(PRESET_KINDS)})",
            source=source,
            field="kind",
        )
    if isinstance(data, bytes | str):
        size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
        if size > limits.card_json_bytes:
            raise LimitExceeded(
                f"preset JSON is {size} bytes, over the limit of {limits.card_json_bytes}",
                source=source,
            )
        parsed = load_json(data, source=source)
    else:
        parsed = data
    if not isinstance(parsed, Mapping):
        raise FormatError(
            f"a preset must be a JSON object, not {_json_type(parsed)}", source=source
        )
    check_text_sizes(parsed, limits.text_field_chars, source=source)

    found = cast("PresetKind | None", kind) or preset_kind(parsed)
    if found is None:
        raise FormatError(
            "not a recognised preset or template (chat-completion, instruct, context, "
            "system prompt, reasoning, textgen, kobold or novel)",
            source=source,
        )
    raw: Mapping[str, Any] = parsed
    if found == "openai":
        raw = migrate_legacy_preset(parsed)
    elif found == "instruct":
        raw = migrate_legacy_instruct(parsed)
    model = PRESET_KINDS[found]
    try:
        result = model.model_validate(dict(raw))
    except ValidationError as exc:
        raise validation_error(exc, raw, source=source) from exc
    return result  # type: ignore[return-value]


def read_preset_file(
    path: Path | str,
    *,
    kind: str | None = None,
    limits: FormatLimits = DEFAULT_LIMITS,
) -> AnyPreset:
    """Read a preset file (size-limited before reading); see :func:`read_preset`."""
    path = Path(path)
    data = read_limited(path, limits.card_json_bytes, what="preset file")
    return read_preset(data, source=str(path), kind=kind, limits=limits)


def preset_to_json(preset: AnyPreset) -> dict[str, Any]:
    """The JSON-ready mapping SillyTavern reads: the file's keys in their order, extras kept."""
    return preset.to_wire()


def write_preset(preset: AnyPreset, path: Path | str) -> None:
    """Write a preset file the way SillyTavern does (4-space JSON), atomically.

    A lone surrogate (read from a ``"\\ud800"`` escape) cannot be UTF-8 encoded; it can only sit
    inside a JSON string, so it is written back as the same ``\\uXXXX`` escape.
    """
    data = dump_json(preset_to_json(preset)).encode("utf-8", errors="backslashreplace")
    atomic_write_bytes(Path(path), data)


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
