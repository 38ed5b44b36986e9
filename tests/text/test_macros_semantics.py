"""Evaluation order, limits, side effects, compat modes and custom macros."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tavernkit.errors import LimitExceeded
from tavernkit.text.macros import (
    MacroEnv,
    MacroRegistry,
    MacroRuntimeError,
    register_builtins,
    render_macros,
    substitute_macros,
)
from tavernkit.text.variables import InMemoryVariables


def test_single_left_to_right_pass_is_a_deliberate_deviation(
    make_env: Callable[..., MacroEnv],
) -> None:
    # The product brief runs variable macros first (that would print "1"); SillyTavern, and
    # tavernkit in every compat mode, evaluate in document order and print the old value.
    for compat in ("default", "st-1.18"):
        env = make_env(compat=compat, variables=InMemoryVariables({"x": "0"}))
        assert substitute_macros("{{getvar::x}}{{setvar::x::1}}{{getvar::x}}", env) == "01"


def test_depth_limit_leaves_deeper_macros_literal(make_env: Callable[..., MacroEnv]) -> None:
    text = "{{reverse::{{reverse::{{user}}}}}}"
    result = render_macros(text, make_env(), max_depth=2)
    assert result.text == "{{user}}"
    assert any("nesting" in w for w in result.warnings)
    assert render_macros(text, make_env(), max_depth=3).text == "User"


def test_max_depth_zero_returns_source(make_env: Callable[..., MacroEnv]) -> None:
    assert substitute_macros("{{user}}", make_env(), max_depth=0) == "{{user}}"


def test_max_output_size_is_a_clear_error(make_env: Callable[..., MacroEnv]) -> None:
    with pytest.raises(LimitExceeded, match="exceeds 50 characters"):
        substitute_macros("{{reverse::" + "x" * 60 + "}}", make_env(), max_output_chars=50)
    # a repeat count beyond the limit never allocates the string
    result = render_macros("{{newline::100000000}}", make_env(), max_output_chars=1000)
    assert result.text == "{{newline::100000000}}"
    assert result.warnings


def test_skip_side_effects_changes_no_variable(make_env: Callable[..., MacroEnv]) -> None:
    variables = InMemoryVariables({"x": "old"}, {"g": "1"})
    env = make_env(variables=variables)
    text = "{{setvar::x::new}}{{getvar::x}}|{{incglobalvar::g}}|{{.y = 3}}{{.y}}|{{$g}}"
    assert substitute_macros(text, env, skip_side_effects=True) == "old|2||1"
    assert variables.local_vars == {"x": "old"}
    assert variables.global_vars == {"g": "1"}


def test_arity_errors_keep_the_macro_and_warn(make_env: Callable[..., MacroEnv]) -> None:
    result = render_macros("{{char::x}}{{reverse}}", make_env())
    assert result.text == "{{char::x}}{{reverse}}"
    assert len(result.warnings) == 2


def test_additions_exist_only_in_default_mode(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(message_count=3, chat_id="c1", provider="openai", persona="tall")
    text = "{{messageCount}}|{{chatId}}|{{provider}}|{{nl}}|{{user_description}}"
    assert substitute_macros(text, env) == "3|c1|openai|\n|tall"
    env.compat = "st-1.18"
    assert substitute_macros(text, env) == text


def test_inline_if_forms(make_env: Callable[..., MacroEnv]) -> None:
    text = "{{if::0::yes::no}}|{{if 1::inline yes}}|{{if::1::yes}}"
    assert substitute_macros(text, make_env()) == "no|inline yes|yes"
    # SillyTavern leaves the 3-argument and the one-argument inline forms raw.
    assert substitute_macros(text, make_env(compat="st-1.18")) == (
        "{{if::0::yes::no}}|{{if 1::inline yes}}|yes"
    )


def test_if_only_evaluates_the_chosen_branch(make_env: Callable[..., MacroEnv]) -> None:
    variables = InMemoryVariables()
    text = "{{if 0}}{{setvar::a::1}}{{else}}{{setvar::b::2}}{{/if}}"
    substitute_macros(text, make_env(variables=variables))
    assert variables.local_vars == {"b": "2"}


def test_custom_macros_and_dynamic_macros(make_env: Callable[..., MacroEnv]) -> None:
    registry = register_builtins(MacroRegistry())

    def shout(call) -> str:  # type: ignore[no-untyped-def]
        if not call.args[0]:
            raise MacroRuntimeError("nothing to shout")
        return call.args[0].upper() + "!"

    registry.register("shout", shout, args=1, aliases=["yell"], description="Upper-cases.")
    env = make_env(dynamic_macros={"Mood": "calm", "count": lambda: 3})
    out = render_macros(
        "{{shout::hi}} {{YELL::{{user}}}} {{shout::}} {{mood}} {{count}}", env, registry=registry
    )
    assert out.text == "HI! USER! {{shout::}} calm 3"
    assert any("nothing to shout" in w for w in out.warnings)
    # a registered block macro pairs with its closing tag
    assert render_macros("{{shout}}a{{/shout}}", env, registry=registry).text == "A!"


def test_post_process_applies_to_every_result(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(post_process=lambda s: f"[{s}]")
    assert substitute_macros("{{user}} and {{char}}", env) == "[User] and [Character]"


def test_original_is_one_shot(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(original="ORIG")
    assert substitute_macros("{{original}}/{{original}}", env) == "ORIG/"
    assert substitute_macros("{{original}}", env) == "ORIG"  # a new render, a new shot
