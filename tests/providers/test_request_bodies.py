"""For every prompt conformance case, the adapter builds the exact body SillyTavern sent.

The prompt itself (messages, or prompt string and stop strings) is taken from the recorded
request: building it is the prompt engine's job. Everything else — model, sampler fields,
their names, values and order — comes from our adapters and the SillyTavern settings mappers,
fed with the case's ``effective_settings``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tavernkit.providers.base import WireRequest
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.request import ChatMessage, ChatPrompt, TextPrompt
from tavernkit.providers.st_samplers import (
    sampling_from_kai_settings,
    sampling_from_oai_settings,
    sampling_from_textgen_settings,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cases_dir() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    root = Path(env) if env else REPO_ROOT.parent / "shared" / "conformance"
    return root / "st-1.18" / "prompts"


CASES = sorted(_cases_dir().glob("*.json")) if _cases_dir().is_dir() else []
pytestmark = pytest.mark.skipif(not CASES, reason=f"no prompt cases at {_cases_dir()}")


def build(case: dict[str, Any]) -> WireRequest:
    recorded = case["request_body"]
    settings = case["effective_settings"]
    if case["api"] == "cc":
        oai = settings["oai_settings"]
        messages = tuple(
            ChatMessage(m["role"], m["content"], name=m.get("name")) for m in recorded["messages"]
        )
        prompt = ChatPrompt(messages, sampling=sampling_from_oai_settings(oai))
        return OpenAIChatAdapter().build_request(
            prompt, model=oai["custom_model"], stream=bool(oai["stream_openai"])
        )
    if case["api"] == "tc":
        textgen = settings["textgen_settings"]
        sampling = sampling_from_textgen_settings(
            textgen, max_tokens=settings["amount_gen"], context_size=settings["max_context"]
        )
        prompt = TextPrompt(recorded["prompt"], sampling=sampling, stop=tuple(recorded["stop"]))
        return OpenAITextAdapter(dialect="textgen").build_request(
            prompt, model=None, stream=bool(textgen["streaming"])
        )
    kai = settings["kai_settings"]
    sampling = sampling_from_kai_settings(
        kai,
        max_tokens=settings["amount_gen"],
        context_size=settings["max_context"],
        single_line=bool(settings["power_user"]["single_line"]),
    )
    return KoboldAdapter(stop_sequence=False).build_request(
        TextPrompt(recorded["prompt"], sampling=sampling),
        model=None,
        stream=bool(kai["streaming_kobold"]),
    )


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_body_matches_sillytavern(path: Path) -> None:
    case = json.loads(path.read_text(encoding="utf-8"))
    wire = build(case)
    assert case["request_path"].endswith(wire.path)
    expected = case["request_body"]
    assert wire.body == expected
    assert list(wire.body) == list(expected), "key order differs"
    # numbers keep their JSON type (1 stays 1, 0.95 stays 0.95)
    assert json.dumps(wire.body) == json.dumps(expected)


def test_every_api_kind_is_covered() -> None:
    kinds = {json.loads(p.read_text(encoding="utf-8"))["api"] for p in CASES}
    assert kinds == {"cc", "tc", "kobold"}
