"""Regenerate builds as SillyTavern 1.18 does: the reply it replaces is removed first.

``Generate('regenerate')`` deletes the last reply before the world-info scan and the build, so
in-chat injections (depth prompts, the author's note, world info at depth) are placed relative
to the remaining chat. Checked on SillyTavern's own recorded cases (chat and text completion)
with a reply appended to their chat: regenerating it must give the prompt of the chat without
it, and the reply's text must not reach the prompt.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tavernkit.models.chat import Message
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.pipeline import PromptBuild
from tavernkit.prompt.st_replay import replay_generation
from tavernkit.prompt.state import chat_before_generation

REPO = Path(__file__).resolve().parents[2]


def conformance_root() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance"


REPLY = "REPLACED-REPLY: the dragon sleeps under the northern hill."


def _case(name: str) -> dict[str, Any]:
    path = conformance_root() / "st-1.18" / "prompts" / name
    if not path.is_file():
        pytest.skip(f"conformance case not found at {path}")
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def _with_reply(inputs: dict[str, Any]) -> dict[str, Any]:
    """The case's chat (it ends with the user's message) plus a character reply."""
    out = copy.deepcopy(inputs)
    template = next(m for m in reversed(out["chat"]) if not m["is_user"])
    reply = {**copy.deepcopy(template), "mes": REPLY, "swipes": [REPLY], "swipe_id": 0}
    out["chat"].append(reply)
    return out


def _text(result: AssembledChat | AssembledText) -> Any:
    if isinstance(result, AssembledChat):
        return result.messages
    return (result.prompt, result.stop)


@pytest.mark.parametrize(
    ("name", "injected"),
    [
        # chat completion: preset in-chat prompts at depths 0, 2 and 99, three roles
        ("cc_injections.json", None),
        # text completion: world info at every position and the author's note at depth 2
        ("tc_wi_all.json", "AN text."),
    ],
)
def test_regenerate_places_injections_relative_to_the_chat_without_the_reply(
    name: str, injected: str | None
) -> None:
    case = _case(name)
    effective = case.get("effective_settings") or {}
    inputs = case["inputs"]
    replied = _with_reply(inputs)

    regenerated = replay_generation(replied, effective, kind="regenerate")
    expected = replay_generation(inputs, effective, kind="regenerate")
    assert _text(regenerated) == _text(expected)
    assert REPLY not in str(_text(regenerated))

    # without the rule the reply would be in the chat and move every depth injection
    kept = replay_generation(replied, effective, kind="normal")
    assert REPLY in str(_text(kept)) and _text(kept) != _text(expected)
    if injected is not None:
        assert isinstance(regenerated, AssembledText) and isinstance(kept, AssembledText)
        last_user = inputs["chat"][-1]["mes"]
        # the note at depth 2 sits two messages above the end of the remaining chat
        prompt = regenerated.prompt
        assert prompt.index(injected) < prompt.index(inputs["chat"][-2]["mes"][:20])
        assert prompt.index(injected) > prompt.index(inputs["chat"][-3]["mes"][:20])
        assert prompt.index(last_user[:20]) > prompt.index(injected)


def test_only_a_reply_is_removed_and_only_for_a_regeneration() -> None:
    user = Message.new("Ada", "Hi", is_user=True)
    reply = Message.new("Mira", "Hello", is_user=False)
    assert list(chat_before_generation([user, reply], "regenerate")) == [user]
    assert list(chat_before_generation([reply, user], "regenerate")) == [reply, user]
    for kind in ("normal", "swipe", "continue", "impersonate", "quiet"):
        assert list(chat_before_generation([user, reply], kind)) == [user, reply]
    assert list(chat_before_generation([], "regenerate")) == []


@pytest.mark.parametrize("name", ["cc_injections.json", "tc_wi_all.json"])
def test_a_recorded_generation_replays_through_the_pipelines_stages(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the goldens check the pipeline's scan -> build (``PromptBuild.run``, what ``prepare``
    # runs), not a copy of it: the replay differs only in where its state comes from
    case = _case(name)
    seen: list[tuple[str, bool]] = []
    real = PromptBuild.run

    def spy(self: PromptBuild, generation_type: str = "normal", **kwargs: Any) -> Any:
        prompt, wi = real(self, generation_type, **kwargs)
        seen.append((generation_type, wi is not None))
        return prompt, wi

    monkeypatch.setattr(PromptBuild, "run", spy)
    result = replay_generation(case["inputs"], case.get("effective_settings"), kind="swipe")
    assert seen == [("swipe", bool(case["inputs"].get("books")))]
    assert isinstance(result, AssembledChat if name.startswith("cc_") else AssembledText)
