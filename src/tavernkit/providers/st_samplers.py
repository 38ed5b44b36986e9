"""SillyTavern's sampler settings mapped onto :class:`~tavernkit.providers.request.Sampling`.

SillyTavern keeps sampler settings per API family under its own names: ``oai_settings``
(``temp_openai``, ``openai_max_tokens``…), the text-generation settings (``temp``,
``rep_pen``…, one object for text-generation-webui, KoboldCpp, llama.cpp and friends) and
``kai_settings`` for KoboldAI classic. These functions read a plain mapping (the JSON object
SillyTavern saved or held live), so they work with the store's models and with raw files.

SillyTavern omits a sampler that is at its "off" value for chat completion (``top_k`` 0,
``min_p`` 0, ``repetition_penalty`` 1, ``seed`` -1); the same values become ``None`` here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tavernkit.providers.request import Sampling

__all__ = [
    "sampling_from_kai_settings",
    "sampling_from_oai_settings",
    "sampling_from_textgen_settings",
]


def _num(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _unless(value: Any, off: float) -> Any:
    value = _num(value)
    return None if value is None or value == off else value


def sampling_from_oai_settings(oai: Mapping[str, Any]) -> Sampling:
    """Chat-completion samplers from SillyTavern's ``oai_settings`` / a CC preset."""
    seed = _num(oai.get("seed"))
    n = _num(oai.get("n"))
    return Sampling(
        max_tokens=_num(oai.get("openai_max_tokens")),
        temperature=_num(oai.get("temp_openai")),
        top_p=_num(oai.get("top_p_openai")),
        top_k=_unless(oai.get("top_k_openai"), 0),
        top_a=_unless(oai.get("top_a_openai"), 0),
        min_p=_unless(oai.get("min_p_openai"), 0),
        repetition_penalty=_unless(oai.get("repetition_penalty_openai"), 1),
        presence_penalty=_num(oai.get("pres_pen_openai")),
        frequency_penalty=_num(oai.get("freq_pen_openai")),
        seed=seed if seed is not None and seed >= 0 else None,
        n=n if n is not None and n > 1 else None,
        context_size=_num(oai.get("openai_max_context")),
    )


def sampling_from_textgen_settings(
    textgen: Mapping[str, Any], *, max_tokens: int, context_size: int
) -> Sampling:
    """Text-completion samplers from SillyTavern's text-generation settings.

    ``max_tokens`` and ``context_size`` are SillyTavern's response length and context size
    (``amount_gen`` / ``max_context``), which live outside the sampler object. Every other
    setting travels in ``backend`` under SillyTavern's names for the text adapter to lay out.
    """
    seed = _num(textgen.get("seed"))
    return Sampling(
        max_tokens=max_tokens,
        temperature=_num(textgen.get("temp")),
        top_p=_num(textgen.get("top_p")),
        top_k=_num(textgen.get("top_k")),
        top_a=_num(textgen.get("top_a")),
        min_p=_num(textgen.get("min_p")),
        typical_p=_num(textgen.get("typical_p")),
        tfs=_num(textgen.get("tfs")),
        repetition_penalty=_num(textgen.get("rep_pen")),
        repetition_penalty_range=_num(textgen.get("rep_pen_range")),
        presence_penalty=_num(textgen.get("presence_pen")),
        frequency_penalty=_num(textgen.get("freq_pen")),
        seed=seed if seed is not None and seed >= 0 else None,
        context_size=context_size,
        backend=dict(textgen),
    )


def sampling_from_kai_settings(
    kai: Mapping[str, Any], *, max_tokens: int, context_size: int, single_line: bool = False
) -> Sampling:
    """KoboldAI-classic samplers from SillyTavern's ``kai_settings``."""
    seed = _num(kai.get("seed"))
    backend = dict(kai)
    backend["singleline"] = single_line
    return Sampling(
        max_tokens=max_tokens,
        temperature=_num(kai.get("temp")),
        top_p=_num(kai.get("top_p")),
        top_k=_num(kai.get("top_k")),
        top_a=_num(kai.get("top_a")),
        min_p=_num(kai.get("min_p")),
        typical_p=_num(kai.get("typical")),
        tfs=_num(kai.get("tfs")),
        repetition_penalty=_num(kai.get("rep_pen")),
        repetition_penalty_range=_num(kai.get("rep_pen_range")),
        seed=seed if seed is not None and seed >= 0 else None,
        context_size=context_size,
        backend=backend,
    )


def dry_sequence_breakers(value: Any) -> list[str]:
    """SillyTavern stores the DRY breakers as a JSON string; backends want a list."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        if isinstance(parsed, list):
            return [str(v) for v in parsed]
    return []
