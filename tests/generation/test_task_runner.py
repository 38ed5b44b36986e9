"""generate_task and the lower-level calls go through the turn runner's one-attempt plan: the
provider's retry policy, the text family, and task messages kept literal by identity."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.generation.one_request import one_attempt_plan, task_error_for
from tavernkit.generation.result import TurnError, TurnFailure, TurnResult
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.templates import InstructTemplate
from tavernkit.prompt.envelope import build_task_envelope
from tavernkit.prompt.state import PromptState, names_only_substitute
from tavernkit.providers.retry import RetryPolicy

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

USER = [{"role": "user", "content": "Translate 'hello' to French."}]


async def test_retry_policy_applies_to_tasks(tmp_path: Path) -> None:
    busy = Reply(status=429, error={"error": {"message": "slow"}}, headers={"retry-after": "0"})
    async with ScriptedServer([busy, Reply(text="Bonjour.")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")])
        try:
            ctx = context(tk, retry=RetryPolicy(max_retries=1, base_delay=0))
            result = await ctx.generate_task(USER)
        finally:
            await tk.close()
    assert result.assistant_text == "Bonjour." and len(server.requests) == 2


async def test_text_family_task_gets_the_folded_prompt(tmp_path: Path) -> None:
    chatml = InstructTemplate(
        name="ChatML",
        input_sequence="<|im_start|>user",
        output_sequence="<|im_start|>assistant",
        system_sequence="<|im_start|>system",
        input_suffix="<|im_end|>\n",
        output_suffix="<|im_end|>\n",
        system_suffix="<|im_end|>\n",
        stop_sequence="<|im_end|>",
    )

    def edit(settings) -> None:  # type: ignore[no-untyped-def]
        settings.prompt.instruct_enabled = True
        settings.prompt.instruct_template = "ChatML"
        settings.prompt.amount_gen = 33

    async with ScriptedServer([Reply(text=" Bonjour.")]) as server:
        base = server.base_url + "/v1"
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(base, name="tg", api="text", source="openai", tools=None)],
            settings_edit=edit,
        )
        await tk.store.put("instruct", chatml, name="ChatML")
        try:
            result = await context(tk).generate_task(USER)
            raw = await context(tk).generate_raw("Say hi.", system_prompt="Be brief.")
        finally:
            await tk.close()
    assert result.assistant_text == " Bonjour."
    task, raw_request = server.requests
    assert task.path == "/v1/completions"
    prompt = task.body["prompt"]
    assert "<|im_start|>user\nTranslate 'hello' to French.<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert task.body["max_tokens"] == 33 and "\n<|im_end|>" in task.body["stop"]
    assert raw == "Bonjour."
    # generate_raw is SillyTavern's createRawPrompt: the system prompt is the story string,
    # wrapped by the template's story-string prefix and suffix (this template has none)
    assert raw_request.body["prompt"] == (
        "Be brief.\n<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_task_messages_stay_literal_even_when_a_preset_prompt_has_the_same_text(
    tmp_path: Path,
) -> None:
    text = "Write as {{char}} for {{user}}."
    main = {"identifier": "main", "name": "Main Prompt", "system_prompt": True, "content": text}
    preset = ChatCompletionPreset.create(stream_openai=False, prompts=[main])
    async with ScriptedServer([Reply(text="ok")]) as server:
        tk, _ = await setup_tavern(tmp_path, [profile(server.base_url + "/v1")], preset=preset)
        try:
            await context(tk).generate_task(
                [{"role": "user", "content": text}], substitute_macros=False
            )
        finally:
            await tk.close()
    contents = [m["content"] for m in server.requests[0].body["messages"]]
    # the preset's main prompt is evaluated, the task message with the same words is not
    assert contents[0].startswith("Write as Mira for Ada.")
    assert contents[-1] == text


def test_envelope_literal_option_with_a_plain_evaluator() -> None:
    from tavernkit.models.character import Character

    state = PromptState(character=Character(name="Mira"), user_name="Ada")
    task = [{"role": "user", "content": "Hi {{user}}"}]
    sub = names_only_substitute("Ada", "Mira")
    literal = build_task_envelope(state, None, task, substitute=sub, literal_task_messages=True)
    evaluated = build_task_envelope(state, None, task, substitute=sub)
    assert literal.messages[-1]["content"] == "Hi {{user}}"
    assert evaluated.messages[-1]["content"] == "Hi Ada"


def test_runner_failures_map_to_task_codes() -> None:
    def failed(cls: str) -> TurnResult:
        cause = TurnFailure(cls, "x")  # type: ignore[arg-type]
        return TurnResult("failed", "half", error=TurnError(cls, cls, cause=cause))  # type: ignore[arg-type]

    assert task_error_for(failed("empty_response")).code == "no_response"
    assert task_error_for(failed("keys_cooling")).code == "rate_limit"
    assert task_error_for(failed("no_credentials")).code == "auth_missing"
    assert task_error_for(failed("empty_response")).details["delivered_text"] == "half"
    aborted = task_error_for(TurnResult("aborted", "so far"))
    assert aborted.code == "aborted" and aborted.details["delivered_text"] == "so far"


async def test_one_attempt_plan_has_one_entry(tmp_path: Path) -> None:
    tk, _ = await setup_tavern(tmp_path, [profile("http://127.0.0.1:9/v1", model="m1")])
    try:
        connection = await context(tk).connection_profiles.resolve()
    finally:
        await tk.close()
    plan = one_attempt_plan(connection, owner="alice")
    attempts = [a async for a in plan.attempts()]
    assert [(a.index, a.entry.model, a.label) for a in attempts] == [(0, "m1", "primary")]
    assert plan.context.quiet and plan.max_key_attempts == 1


async def test_response_length_caps_a_tasks_reply_on_either_family(tmp_path: Path) -> None:
    async with ScriptedServer([Reply(text="Bonjour."), Reply(text=" Bonjour.")]) as server:
        base = server.base_url + "/v1"
        tk, _ = await setup_tavern(
            tmp_path,
            [profile(base), profile(base, name="tg", api="text", source="openai", tools=None)],
        )
        try:
            await context(tk).generate_task(USER, response_length=12)
            await context(tk).generate_task(USER, api_preset_name="tg", response_length=9)
            with pytest.raises(GenerateTaskError) as refused:
                await context(tk).generate_task(USER, response_length=0)
        finally:
            await tk.close()
    assert [r.body["max_tokens"] for r in server.requests] == [12, 9]
    assert refused.value.code == "invalid_input"
    assert refused.value.details["field"] == "response_length"
