"""The text-completion family through the turn runner: per-attempt fitting from the untrimmed
original, the prefill and carried text as the prompt's tail, directives before the reply
opening — against a scripted OpenAI-compatible text-completion server on loopback."""

from __future__ import annotations

from tavernkit.generation.attempt.chat_prompt import ByteEstimate
from tavernkit.generation.attempt.text_prompt import TextTurnPrompt, adapt_text_request
from tavernkit.generation.sink import RecordingSink
from tavernkit.generation.turn import TurnOptions, run_turn
from tavernkit.providers.profiles import FAMILY_DEFAULTS
from tavernkit.providers.request import Sampling, TextPrompt

from ._harness import Route, World
from ._upstream import error, text_stream

#: ~100 tokens each by the byte estimate (335 bytes / 3.35)
HISTORY = [f"msg{n}: " + "x" * 329 for n in range(1, 5)]
PROMPT = TextTurnPrompt.from_pieces(
    ["Mira keeps the lighthouse.\n"],
    [h + "\n" for h in HISTORY],
    "Mira:",
    sampling=Sampling(max_tokens=50, temperature=0.7),
    stop=("\nAda:",),
)


async def turn(world: World, plan, prompt=PROMPT, **options):
    sink = RecordingSink()
    result = await run_turn(
        plan,
        prompt,
        sink,
        clock=world.clock,
        sleep=world.clock.sleep,
        options=TurnOptions(**options),
    )
    return result, sink


def sent_prompt(world: World, n: int) -> str:
    body = world.upstream.requests[n].body
    assert world.upstream.requests[n].path == "/v1/completions"
    return str(body["prompt"])


def test_a_finished_prompt_keeps_its_last_line_as_the_opening() -> None:
    text = "Story.\nAda: hi\n<|im_start|>assistant\n"
    prompt = TextTurnPrompt.from_text_prompt(TextPrompt(text, stop=("x",)), prefill="Well")
    assert prompt.opening == "<|im_start|>assistant\n" and prompt.text == text
    assert prompt.prefill == "Well" and prompt.stop == ("x",)
    profile = FAMILY_DEFAULTS["text"]
    adapted = adapt_text_request(
        prompt, profile, ByteEstimate(), prefill="Well", directives=["Be brief."]
    )
    assert adapted.request.prompt == (
        "Story.\nAda: hi\n[System: Be brief.]\n<|im_start|>assistant\nWell"
    )
    one_line = TextTurnPrompt.from_text_prompt(TextPrompt("Mira:"))
    assert one_line.blocks == () and one_line.opening == "Mira:"


async def test_text_turn_sends_the_folded_prompt(world: World) -> None:
    world.upstream.add(text_stream([" The lamp ", "is lit."]))
    plan = world.plan([Route("tg-model", family="text", max_output_tokens=40)])
    result, sink = await turn(world, plan, segment="delta")
    assert result.status == "completed"
    assert result.text == sink.text == "The lamp is lit."
    body = world.upstream.requests[0].body
    assert body["prompt"] == PROMPT.text
    assert body["stop"] == ["\nAda:"]
    # the preset's 50 clamps to the model's 40-token output ceiling
    assert body["max_tokens"] == 40 and body["temperature"] == 0.7
    assert result.completion is not None and result.completion.text == " The lamp is lit."


async def test_fallback_refits_history_from_the_untrimmed_original(world: World) -> None:
    world.upstream.add(error(500), text_stream(["Short ", "answer."]))
    plan = world.plan(
        [
            Route("big", family="text", context_window=8000),
            Route("small", family="text", context_window=300),
        ]
    )
    result, _ = await turn(world, plan)
    assert result.status == "completed" and result.notice is not None
    first, second = sent_prompt(world, 0), sent_prompt(world, 1)
    assert all(h in first for h in HISTORY)
    # the small window (300 - 50 reserved) keeps the story string, the newest message and
    # the trigger; the oldest two go, and the opening stays last
    assert HISTORY[0] not in second and HISTORY[1] not in second
    assert HISTORY[2] in second and HISTORY[3] in second
    assert second.startswith("Mira keeps the lighthouse.\n") and second.endswith("Mira:")


async def test_cut_stream_continues_with_the_carried_text_as_the_prompt_tail(
    world: World,
) -> None:
    world.upstream.add(
        text_stream([" The storm came. ", "It was"], cut=True),
        # the model repeats what it was given before going on: the echo is stripped
        text_stream(["The storm came. It was", " cold."]),
    )
    plan = world.plan([Route("a", family="text"), Route("b", family="text")])
    result, sink = await turn(world, plan, segment="delta")
    assert result.status == "completed"
    assert result.text == sink.text == "The storm came. It was cold."
    # "Mira:" and the carried text join with a space, as a prompt bias would
    assert sent_prompt(world, 1) == PROMPT.text + " The storm came. It was"
    assert result.attempts[1].continuation and result.attempts[1].prefill_mode == "native"


async def test_manual_prefill_is_the_prompt_tail_and_is_shown(world: World) -> None:
    world.upstream.add(text_stream([" Hello", " there."]))
    prompt = TextTurnPrompt.from_text_prompt(TextPrompt("Ada: hi\nMira:"), prefill="*smiles*")
    result, _ = await turn(world, world.plan([Route("m", family="text")]), prompt)
    assert sent_prompt(world, 0) == "Ada: hi\nMira: *smiles*"
    assert result.text == "*smiles* Hello there."


async def test_speaker_guard_directive_goes_before_the_opening(world: World) -> None:
    world.upstream.add(text_stream(["Ada: I ask again"]), text_stream([" The lamp is lit."]))
    result, _ = await turn(
        world,
        world.plan([Route("m", family="text")]),
        user_names=("Ada",),
        char_name="Mira",
    )
    assert result.status == "completed" and result.text == "The lamp is lit."
    retried = sent_prompt(world, 1)
    head, _, tail = retried.rpartition("[System: ")
    assert head == "".join(b.text for b in PROMPT.blocks)
    assert tail.endswith("]\nMira:") and "Reply only as Mira" in tail


async def test_prompt_that_cannot_fit_fails_without_a_request(world: World) -> None:
    plan = world.plan([Route("tiny", family="text", context_window=120)])
    result, sink = await turn(world, plan)
    assert result.status == "failed"
    assert result.error is not None and result.error.error_class == "context_too_long"
    assert world.upstream.requests == [] and len(sink.errors) == 1


async def test_text_turns_ignore_tools(world: World) -> None:
    from tavernkit.tools.registry import FunctionTool

    world.upstream.add(text_stream(["Fine."]))
    tool = FunctionTool(name="roll", description="dice", parameters={"type": "object"})
    result, _ = await turn(world, world.plan([Route("m", family="text")]), tools=[tool])
    assert result.status == "completed" and result.text == "Fine."
    assert "tools" not in world.upstream.requests[0].body
