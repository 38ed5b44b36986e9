"""Text-completion sampler presets: ``presets/textgen``, ``presets/kobold``, ``presets/novel``.

Each backend family keeps its own key names (``temp`` and ``rep_pen`` for text-generation-webui
style backends and KoboldAI, ``temperature`` and ``repetition_penalty`` for NovelAI), so each
gets its own model. Defaults are those of SillyTavern's shipped ``textgen/Default.json`` and
``kobold/Neutral.json``; NovelAI presets differ in which keys they carry, so its fields default to
None (not set). Files are open and scalars are validated strictly (see ``models.preset``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from tavernkit.models.base import Number, WireModel

__all__ = ["KoboldSettings", "NovelSettings", "TextGenSettings"]

_STRICT = ConfigDict(strict=True)


def _list(*items: Any) -> Any:
    # A fresh list per record: defaults must never be shared between instances.
    return Field(default_factory=lambda: list(items))


class TextGenSettings(WireModel):
    """A text-generation sampler preset (text-generation-webui, llama.cpp, vLLM, Aphrodite...)."""

    model_config = _STRICT

    temp: Number = 1
    temperature_last: bool = True
    top_p: Number = 0.95
    top_k: Number = 0
    top_a: Number = 0
    tfs: Number = 1
    epsilon_cutoff: Number = 0
    eta_cutoff: Number = 0
    typical_p: Number = 1
    min_p: Number = 0.01
    rep_pen: Number = 1.1
    rep_pen_range: Number = 0
    rep_pen_decay: Number = 0
    rep_pen_slope: Number = 1
    no_repeat_ngram_size: Number = 0
    penalty_alpha: Number = 0
    num_beams: Number = 1
    length_penalty: Number = 1
    min_length: Number = 0
    encoder_rep_pen: Number = 1
    freq_pen: Number = 0
    presence_pen: Number = 0
    skew: Number = 0
    do_sample: bool = True
    early_stopping: bool = False
    dynatemp: bool = False
    min_temp: Number = 0
    max_temp: Number = 2
    dynatemp_exponent: Number = 1
    smoothing_factor: Number = 0
    smoothing_curve: Number = 1
    dry_allowed_length: Number = 2
    dry_multiplier: Number = 0
    dry_base: Number = 1.75
    #: A JSON array in a string (as SillyTavern stores it); older presets hold the array itself.
    dry_sequence_breakers: str | list[str] = '["\\n", ":", "\\"", "*"]'
    dry_penalty_last_n: Number = 0
    add_bos_token: bool = True
    ban_eos_token: bool = False
    skip_special_tokens: bool = True
    mirostat_mode: Number = 0
    mirostat_tau: Number = 5
    mirostat_eta: Number = 0.1
    guidance_scale: Number = 1
    negative_prompt: str = ""
    grammar_string: str = ""
    json_schema: dict[str, Any] | None = None
    json_schema_allow_empty: bool = False
    banned_tokens: str = ""
    sampler_priority: list[str] = _list(
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "dry",
        "temperature",
        "dynamic_temperature",
        "quadratic_sampling",
        "top_n_sigma",
        "top_k",
        "top_p",
        "typical_p",
        "epsilon_cutoff",
        "eta_cutoff",
        "tfs",
        "top_a",
        "min_p",
        "mirostat",
        "xtc",
        "encoder_repetition_penalty",
        "no_repeat_ngram",
    )
    samplers: list[str] = _list(
        "penalties",
        "dry",
        "top_n_sigma",
        "top_k",
        "typ_p",
        "tfs_z",
        "typical_p",
        "xtc",
        "top_p",
        "min_p",
        "temperature",
    )
    samplers_priorities: list[str] = _list(
        "dry",
        "penalties",
        "no_repeat_ngram",
        "temperature",
        "top_nsigma",
        "top_p_top_k",
        "top_a",
        "min_p",
        "tfs",
        "eta_cutoff",
        "epsilon_cutoff",
        "typical_p",
        "quadratic",
        "xtc",
    )
    ignore_eos_token: bool = False
    spaces_between_special_tokens: bool = True
    speculative_ngram: bool = False
    sampler_order: list[int] = _list(6, 0, 1, 3, 4, 2, 5)
    logit_bias: list[Any] = _list()
    xtc_threshold: Number = 0.1
    xtc_probability: Number = 0
    nsigma: Number = 0
    min_keep: Number = 0
    rep_pen_size: Number = 0


class KoboldSettings(WireModel):
    """A KoboldAI / KoboldCpp sampler preset."""

    model_config = _STRICT

    temp: Number = 1
    rep_pen: Number = 1
    rep_pen_range: Number = 0
    top_p: Number = 1
    min_p: Number = 0
    top_a: Number = 0
    top_k: Number = 0
    typical: Number = 1
    tfs: Number = 1
    rep_pen_slope: Number = 0
    sampler_order: list[int] = _list(6, 0, 1, 3, 4, 2, 5)
    mirostat: Number = 0
    mirostat_tau: Number = 5
    mirostat_eta: Number = 0.1
    use_default_badwordsids: bool = False
    grammar: str = ""
    # Older presets also carry the response length and context size.
    genamt: int | None = None
    max_length: int | None = None


class NovelSettings(WireModel):
    """A NovelAI sampler preset."""

    model_config = _STRICT

    order: list[int] | None = None
    temperature: Number | None = None
    max_length: int | None = None
    min_length: int | None = None
    top_k: Number | None = None
    top_p: Number | None = None
    top_a: Number | None = None
    typical_p: Number | None = None
    tail_free_sampling: Number | None = None
    repetition_penalty: Number | None = None
    repetition_penalty_range: Number | None = None
    repetition_penalty_slope: Number | None = None
    repetition_penalty_frequency: Number | None = None
    repetition_penalty_presence: Number | None = None
    phrase_rep_pen: str | None = None
    max_context: int | None = None
    min_p: Number | None = None
    math1_temp: Number | None = None
    math1_quad: Number | None = None
    math1_quad_entropy_scale: Number | None = None
    mirostat_lr: Number | None = None
    mirostat_tau: Number | None = None
    use_cache: bool | None = None
    return_full_text: bool | None = None
    #: The NovelAI module ("vanilla" = none).
    prefix: str | None = None
