"""Every world-info golden scenario, replayed in compat mode (README §2 of the conformance set).

Reads ``<TAVERNKIT_CONFORMANCE_DIR or ../shared/conformance>/st-1.18/worldinfo/*.json`` and
skips when the folder is absent. Macros go through a tiny test-side substitute
(``_macros.mini_substitute``) so these tests do not depend on the macro engine; the
conformance suite runs the same scenarios with the real engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernkit.worldinfo import WorldInfoEngine
from tavernkit.worldinfo.replay import ScenarioReplay
from tavernkit.worldinfo.tokens import chat_message_counter

from ._macros import mini_substitute
from ._paths import conformance_root, worldinfo_goldens

WI_DIR = conformance_root() / "st-1.18" / "worldinfo"
FILES = worldinfo_goldens()
ENGINE = WorldInfoEngine()


class Replay:
    def __init__(self, values: list[float]) -> None:
        self.values = list(values)
        self.used = 0

    def __call__(self) -> float:
        assert self.used < len(self.values), "drew more random numbers than SillyTavern"
        self.used += 1
        return self.values[self.used - 1]


def tiktoken_counter(scenario: dict[str, Any]) -> Any:
    """gpt-4o token counts for ``budget_tiktoken``, when an offline o200k encoder exists."""
    try:
        import quicktok

        enc = quicktok.get_encoding("o200k_base")
    except Exception:
        pytest.skip("budget_tiktoken needs quicktok (offline o200k) for gpt-4o counts")
    return chat_message_counter(lambda text: int(enc.count(text)))


@pytest.mark.skipif(not FILES, reason=f"no world-info goldens at {WI_DIR}")
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden(path: Path) -> None:
    scenario = json.loads(path.read_text(encoding="utf-8"))
    counter = None
    if (scenario.get("tokenizer") or {}).get("main_api") == "openai":
        counter = tiktoken_counter(scenario)
    character = scenario.get("character") or {}
    persona = scenario.get("persona") or {}
    replay = ScenarioReplay(
        scenario,
        substitute=mini_substitute(character.get("name", ""), persona.get("name", "User")),
        engine=ENGINE,
        **({"count_tokens": counter} if counter else {}),
    )
    for n, turn in enumerate(scenario["turns"]):
        rng = Replay(turn["random_consumed"])
        outcome = replay.run_turn(turn, rng)
        assert outcome.scan_chat_length == turn["wi_chat_length"], f"turn {n}: scan chat length"
        expected = turn["result"]
        assert outcome.st_result["activated"] == expected["activated"], f"turn {n}: activated"
        assert outcome.st_result == expected, f"turn {n}: result"
        assert outcome.timed_state_after == turn["timed_state_after"], f"turn {n}: timed state"
        assert rng.used == len(rng.values), f"turn {n}: random numbers left unused"
