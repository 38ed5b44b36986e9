"""The renderer service: providers, precedence, used names, messages, presets, async."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.text.macros import MacroEnv
from tavernkit.text.render import (
    PromptRenderer,
    RenderContext,
    RenderExtensions,
    RenderOptions,
    SyntaxResult,
)
from tavernkit.text.variables import InMemoryVariables


def env(**kw: Any) -> MacroEnv:
    kw.setdefault("user", "Ann")
    kw.setdefault("char", "Bo")
    kw.setdefault("variables", InMemoryVariables())
    kw.setdefault("clock", lambda: datetime(2024, 3, 5, 14, 7, 9, tzinfo=UTC))
    return MacroEnv(**kw)


def upper(args: list[str], _v: Mapping[str, Any], _c: Mapping[str, Any]) -> str:
    return " ".join(args).upper()


async def test_template_with_function_provider_and_builtins() -> None:
    renderer = PromptRenderer()
    dispose = renderer.register_function_provider("shout", upper)
    result = await renderer.render_template(
        "{{shout::hi::{{user}}}} and {{char}}", options=RenderOptions(env=env())
    )
    assert result.text == "HI ANN and Bo"
    assert result.variables == ["user", "shout", "char"]
    dispose()
    dispose()  # idempotent
    after = await renderer.render_template("{{shout::x}}", options=RenderOptions(env=env()))
    assert after.text == "{{shout::x}}"  # unknown again: left as written
    assert after.variables == []


async def test_disposer_does_not_remove_a_newer_registration() -> None:
    renderer = PromptRenderer()
    old = renderer.register_function_provider("f", lambda a, v, c: "old")
    renderer.register_function_provider("f", lambda a, v, c: "new")
    old()
    assert (await renderer.render_template("{{f}}")).text == "new"


async def test_variable_precedence() -> None:
    renderer = PromptRenderer()
    renderer.set_variable("a", "static")
    renderer.set_variable("b", "static")
    renderer.set_variable("c", "static")
    renderer.set_variable("d", "static")
    assert renderer.get_variable("a") == "static"
    renderer.register_variable_provider(lambda: {"c": "registered", "d": "registered"})
    options = RenderOptions(extensions=([lambda: {"d": "per-call"}], {}))
    result = await renderer.render_template(
        "{{a}} {{b}} {{c}} {{d}}", {"b": "call", "c": "call", "d": "call"}, options
    )
    assert result.text == "static call registered per-call"
    renderer.remove_variable("a")
    assert renderer.get_variable("a") is None
    assert (await renderer.render_template("[{{a}}]")).text == "[{{a}}]"


async def test_function_precedence_and_variables_over_functions() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("f", lambda a, v, c: "registered")
    renderer.register_function_provider("g", lambda a, v, c: f"g({','.join(a)})")
    per_call = RenderExtensions(function_providers={"f": lambda a, v, c: "per-call"})
    result = await renderer.render_template(
        "{{f}} {{g}} {{g::1::2}}", {"g": "variable"}, RenderOptions(per_call)
    )
    # A bare name is the variable; with arguments it is the function.
    assert result.text == "per-call variable g(1,2)"


async def test_providers_shadow_builtin_macros_case_insensitively() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("Random", lambda a, v, c: "fixed")
    result = await renderer.render_template(
        "{{random::a::b}} {{USER}}", {"user": "Zed"}, RenderOptions(env=env())
    )
    assert result.text == "fixed Zed"
    assert result.variables == ["Random", "user"]


async def test_function_provider_receives_variables_and_configurable() -> None:
    seen: dict[str, Any] = {}

    def spy(args: list[str], variables: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
        seen.update(args=args, variables=dict(variables), cfg=dict(cfg))
        return "ok"

    renderer = PromptRenderer()
    renderer.set_variable("s", "1")
    renderer.register_function_provider("spy", spy)
    result = await renderer.render_template(
        "{{spy::x::{{s}}}}", {"v": 2}, RenderOptions(configurable={"session": "S"})
    )
    assert result.text == "ok"
    assert seen == {"args": ["x", "1"], "variables": {"s": "1", "v": 2}, "cfg": {"session": "S"}}


async def test_values_are_normalised_and_thunks_called_once_per_render() -> None:
    calls: list[int] = []

    def thunk() -> int:
        calls.append(1)
        return 42

    renderer = PromptRenderer()
    result = await renderer.render_template(
        "{{n}} {{n}} {{xs}} {{obj}} {{none}} {{flag}}",
        {"n": thunk, "xs": [1, "a"], "obj": {"k": 1.0}, "none": None, "flag": True},
    )
    assert result.text == '42 42 [1,"a"] {"k":1}  true'
    assert calls == [1]


async def test_provider_errors_keep_the_macro_and_warn() -> None:
    def broken(args: list[str], v: Mapping[str, Any], c: Mapping[str, Any]) -> str:
        raise RuntimeError("boom")

    renderer = PromptRenderer()
    renderer.register_function_provider("broken", broken)
    result = await renderer.render_template("a {{broken::{{user}}}} b", options=RenderOptions())
    assert result.text == "a {{broken::User}} b"
    assert any("boom" in w for w in result.warnings)
    assert "broken" not in result.variables


async def test_used_names_first_seen_order_and_untaken_branches() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("f", lambda a, v, c: "F")
    result = await renderer.render_template(
        "{{b}}{{if {{a}}}}{{f}}{{else}}{{never}}{{/if}}{{b}}{{// note}}{{setvar::x::1}}",
        {"a": "yes", "b": "B", "never": "N"},
        RenderOptions(env=env()),
    )
    assert result.text == "BFB"
    assert result.variables == ["b", "a", "f", "setvar"]


async def test_if_condition_reads_a_renderer_variable() -> None:
    renderer = PromptRenderer()
    template = "{{if flag}}on{{else}}off{{/if}}"
    assert (await renderer.render_template(template, {"flag": "1"})).text == "on"
    assert (await renderer.render_template(template, {"flag": ""})).text == "off"


async def test_scoped_block_is_the_last_argument() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("wrap", lambda a, v, c: f"<{a[0]}>{a[1]}</{a[0]}>")
    result = await renderer.render_template("{{wrap::b}}\n  bold {{user}}\n{{/wrap}}")
    assert result.text == "<b>bold User</b>"


async def test_options_max_depth_substitute_and_side_effects() -> None:
    renderer = PromptRenderer()
    e = env()
    e.variables.set("x", "old", "local")
    raw = await renderer.render_template("{{user}}", options=RenderOptions(substitute_macros=False))
    assert raw.text == "{{user}}"
    unrendered = await renderer.render_template("{{user}}", options=RenderOptions(max_depth=0))
    assert unrendered.text == "{{user}}"
    dry = await renderer.render_template(
        "{{setvar::x::new}}{{getvar::x}}", options=RenderOptions(env=e, skip_side_effects=True)
    )
    assert dry.text == "old"
    assert e.variables.get("x", "local") == "old"
    nested = "{{reverse::" * 12 + "ab" + "}}" * 12
    shallow = await renderer.render_template(nested, options=RenderOptions(max_depth=3))
    assert any("deeper than 3" in w for w in shallow.warnings)


async def test_render_messages_keeps_keys_parts_and_order() -> None:
    renderer = PromptRenderer()
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are {{char}}.", "name": "sys", "x-extra": 1},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi {{x}}"}, image, {"type": "text", "text": "!"}],
            "id": "m1",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f"}}],
        },
        {"role": "tool", "tool_call_id": "t", "content": "{{user}} stays raw"},
    ]
    out = await renderer.render_messages(messages, {"x": "there"}, RenderOptions(env=env()))
    assert out == [
        {"role": "system", "content": "You are Bo.", "name": "sys", "x-extra": 1},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Hi there"},
                image,
                {"type": "text", "text": "!"},
            ],
            "id": "m1",
        },
        messages[2],
        messages[3],
    ]
    assert messages[0]["content"] == "You are {{char}}."  # input untouched
    assert out[0] is not messages[0]


async def test_messages_render_in_order_sharing_chat_variables() -> None:
    renderer = PromptRenderer()
    out = await renderer.render_messages(
        [
            {"role": "system", "content": "{{setvar::mood::calm}}set"},
            {"role": "user", "content": "mood={{getvar::mood}}"},
        ],
        options=RenderOptions(env=env()),
    )
    assert [m["content"] for m in out] == ["set", "mood=calm"]


async def test_setvar_carries_to_the_next_message_with_default_options(tmp_path: Any) -> None:
    from tavernkit.facade import Tavern

    messages = [
        {"role": "system", "content": "{{setvar::mood::calm}}set"},
        {"role": "user", "content": "mood={{getvar::mood}}"},
    ]
    out = await PromptRenderer().render_messages(messages)
    assert [m["content"] for m in out] == ["set", "mood=calm"]
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        out = await tk.prompt_renderer.render_messages(messages)
    assert [m["content"] for m in out] == ["set", "mood=calm"]
    # and each call starts afresh: nothing leaks from one list into the next
    out = await PromptRenderer().render_messages(messages[1:])
    assert out[0]["content"] == "mood="


async def test_render_preset_template() -> None:
    preset = ChatCompletionPreset.model_validate(
        {
            "prompts": [
                {"identifier": "main", "role": "system", "content": "Main for {{char}} {{tone}}"},
                {"identifier": "chatHistory", "marker": True},
                {"identifier": "off", "role": "system", "content": "disabled {{never}}"},
                {"identifier": "jb", "role": "user", "content": "Stay {{tone}}, {{user}}."},
                {"identifier": "empty", "role": "system", "content": ""},
            ],
            "prompt_order": [
                {
                    "character_id": 100001,
                    "order": [
                        {"identifier": "main", "enabled": True},
                        {"identifier": "chatHistory", "enabled": True},
                        {"identifier": "off", "enabled": False},
                        {"identifier": "empty", "enabled": True},
                        {"identifier": "jb", "enabled": True},
                    ],
                }
            ],
        }
    )
    renderer = PromptRenderer()
    result = await renderer.render_preset_template(
        preset, {"tone": "kind"}, RenderOptions(env=env())
    )
    assert result.messages == [
        {"role": "system", "content": "Main for Bo kind"},
        {"role": "user", "content": "Stay kind, Ann."},
    ]
    assert result.identifiers == ["main", "jb"]
    assert result.variables == ["char", "tone", "user"]


async def test_async_function_provider_runs_in_order() -> None:
    log: list[str] = []

    async def fetch(args: list[str], v: Mapping[str, Any], c: Mapping[str, Any]) -> str:
        await asyncio.sleep(0)
        log.append(f"fetch {args[0]}")
        return f"<{args[0]}>"

    async def later() -> str:
        await asyncio.sleep(0)
        return "thunk"

    renderer = PromptRenderer()
    renderer.register_function_provider("fetch", fetch)
    result = await renderer.render_template(
        "{{setvar::k::1}}{{fetch::{{getvar::k}}}} {{reverse::{{fetch::ab}}}} {{t}}",
        {"t": later},
        RenderOptions(env=env()),
    )
    assert result.text == "<1> >ba< thunk"
    assert log == ["fetch 1", "fetch ab"]
    assert result.variables == ["setvar", "getvar", "fetch", "reverse", "t"]


async def test_sync_provider_returning_awaitable_inline_warns() -> None:
    async def coro() -> str:
        return "x"

    renderer = PromptRenderer()
    renderer.register_function_provider("sneaky", lambda a, v, c: coro())
    result = await renderer.render_template("{{sneaky}}")
    assert result.text == "{{sneaky}}"
    assert any("awaitable" in w for w in result.warnings)


async def test_async_variable_provider_is_awaited() -> None:
    async def provider() -> Mapping[str, Any]:
        return {"p": "from-async"}

    renderer = PromptRenderer()
    renderer.register_variable_provider(provider)
    assert (await renderer.render_template("{{p}}")).text == "from-async"


def test_render_sync_runs_async_providers_without_a_loop() -> None:
    async def fetch(args: list[str], v: Mapping[str, Any], c: Mapping[str, Any]) -> str:
        return "done"

    renderer = PromptRenderer()
    renderer.register_function_provider("fetch", fetch)
    assert renderer.render_sync("{{fetch}} {{user}}").text == "done User"


def test_substitute_for_goes_through_the_renderer() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("shout", upper)
    renderer.set_variable("tone", "dry")
    sub = renderer.substitute_for(env(), compat="st-1.18")
    assert sub("{{shout::{{char}}}} {{tone}} {{original}}", original="orig") == "BO dry orig"
    assert sub("{{x}}", dynamic={"x": "dyn"}) == "dyn"
    assert sub("plain") == "plain"


async def test_pluggable_syntax_uses_the_same_providers() -> None:
    import re

    class Braces:
        """A toy ``{name}`` syntax: enough to show providers do not depend on the syntax."""

        def render(
            self, source: str, context: RenderContext, options: RenderOptions
        ) -> SyntaxResult:
            def one(m: re.Match[str]) -> str:
                name = m.group(1)
                if context.has_variable(name):
                    return str(context.variable(name))
                if context.has_function(name):
                    return str(context.call(name, []))
                return m.group(0)

            return SyntaxResult(re.sub(r"\{(\w+)\}", one, source))

    renderer = PromptRenderer()
    renderer.register_syntax("braces", Braces())
    renderer.register_function_provider("f", lambda a, v, c: "F")
    result = await renderer.render_template(
        "{x} {f} {y}", {"x": "X"}, RenderOptions(syntax="braces")
    )
    assert result.text == "X F {y}"
    assert result.variables == ["x", "f"]
    with pytest.raises(ValueError, match="unknown template syntax"):
        await renderer.render_template("a", options=RenderOptions(syntax="nope"))


async def test_extensions_accept_mapping_and_reject_unknown_keys() -> None:
    options = RenderOptions({"function_providers": {"f": lambda a, v, c: "F"}})
    assert (await PromptRenderer().render_template("{{f}}", options=options)).text == "F"
    with pytest.raises(TypeError):
        RenderOptions({"bogus": 1})


async def test_async_render_does_not_block_the_loop() -> None:
    started = threading.Event()

    async def slow(args: list[str], v: Mapping[str, Any], c: Mapping[str, Any]) -> str:
        started.set()
        await asyncio.sleep(0.05)
        return "slow"

    renderer = PromptRenderer()
    renderer.register_function_provider("slow", slow)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not started.is_set() or ticks < 3:
            ticks += 1
            await asyncio.sleep(0.005)

    result, _ = await asyncio.gather(renderer.render_template("{{slow}}"), ticker())
    assert result.text == "slow"
    assert ticks >= 3


def test_a_registered_provider_works_inside_a_prompt_build() -> None:
    """The prompt builders take ``substitute=``; the renderer's evaluator brings its providers
    (and the static variables) into every prompt of the build."""
    from tavernkit.models.character import Character
    from tavernkit.models.preset import DEFAULT_PROMPTS
    from tavernkit.prompt import PromptState, build_chat_completion
    from tavernkit.prompt.macros import macro_substitute

    data: dict[str, Any] = {"prompts": [dict(p) for p in DEFAULT_PROMPTS]}
    data["prompts"][0]["content"] = "Main for {{shout::{{char}}}} in a {{tone}} voice."
    data["prompt_order"] = [
        {"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}
    ]
    state = PromptState(
        character=Character(name="Aria", description="d"),
        messages=[],
        preset=ChatCompletionPreset.model_validate(data),
    )
    renderer = PromptRenderer()
    renderer.register_function_provider("shout", upper)
    renderer.set_variable("tone", "dry")
    sub = renderer.substitute_for(macro_substitute(state).env)
    messages = build_chat_completion(state, substitute=sub).messages
    assert messages[0]["content"] == "Main for ARIA in a dry voice."


async def test_env_factory_supplies_the_default_environment() -> None:
    renderer = PromptRenderer(env_factory=lambda: env(user="Factory"))
    assert (await renderer.render_template("{{user}}")).text == "Factory"
    explicit = RenderOptions(env=env(user="Given"))
    assert (await renderer.render_template("{{user}}", options=explicit)).text == "Given"
