"""ChatLuna's template dialect on the renderer (``RenderOptions(syntax="chatluna")``): the
engine README's examples, the lexer's escapes, expressions with JavaScript semantics, blocks,
max depth, the names a render reports, providers and the built-in functions."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from tavernkit.errors import TemplateError
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render import PromptRenderer, RenderOptions

NOW = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)  # a Tuesday


def options(**kw: Any) -> RenderOptions:
    env = MacroEnv(clock=lambda: NOW, rng=random.Random(7))
    return RenderOptions(syntax="chatluna", env=env, **kw)


async def render(source: str, variables: dict[str, Any] | None = None, **kw: Any) -> str:
    return (await PromptRenderer().render_template(source, variables, options(**kw))).text


@pytest.mark.parametrize(
    ("source", "variables", "expected"),
    [
        # the engine README's examples
        ("{if score >= 90}A{elseif score >= 80}B{else}C{/if}", {"score": 85}, "B"),
        ("{repeat 3}Hello {/repeat}", {}, "Hello Hello Hello "),
        ("{for row in m}{for x in row}{x} {/for}\n{/for}", {"m": [[1, 2], [3, 4]]}, "1 2 \n3 4 \n"),
        ("{{if}} is a control structure", {}, "{if} is a control structure"),
        ("Use {{variable}} for interpolation", {}, "Use {variable} for interpolation"),
        # text: lone braces, unclosed tags, JSON and unparsable tags stay as written
        ("a } b", {}, "a } b"),
        ("{name", {"name": "x"}, "{name"),
        ('{"a": 1}', {}, '{"a": 1}'),
        ("{upper({name})}", {"name": "x"}, "{upper({name})}"),  # the outdated README form
        ("{#tag}", {}, "{#tag}"),
        ("{for a b}x{/for}", {}, "{for a b}x{/for}"),  # no ' in ': text, body not consumed
        ("{else}|{/if}", {}, "|{/if}"),  # outside an if
        ("{'}'}", {}, "}"),  # a brace inside quotes does not close the tag
    ],
)
async def test_syntax(source: str, variables: dict[str, Any], expected: str) -> None:
    assert await render(source, variables) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{'5' == 5}", "false"),  # strict equality
        ("{5 == 5.0}", "true"),
        ("{1 + 2 * 3}", "7"),
        ("{(1 + 2) * 3}", "9"),
        ("{'a' + 1}", "a1"),
        ("{xs + ''}", "1,2,3"),
        ("{7 % 4} {7 / 2} {1 / 0} {-1 / 0} {0 / 0}", "3 3.5 Infinity -Infinity NaN"),
        ("{0 || 'x'} {'' && 'y'} {1 && 'y'}", "x  y"),
        ("{!0} {!''} {!xs}", "true true false"),
        ("{n > 2 ? 'big' : 'small'}", "big"),
        ("{'b' > 'a'} {'10' < 9}", "true false"),
        (
            "{obj.name} {obj.missing} {obj['name']} {xs[1]} {xs.length} {word.length}",
            "Ada  Ada 2 3 5",
        ),
        ("{missing.deep}", ""),
        ("{null}|{true}|{undefinedName}", "|true|"),
        ("{'tab\\tand\\nnew' + '\\q'}", "tab\tand\nnewq"),
    ],
)
async def test_expressions_have_javascript_semantics(source: str, expected: str) -> None:
    variables = {"xs": [1, 2, 3], "n": 3, "obj": {"name": "Ada"}, "word": "hello"}
    assert await render(source, variables) == expected


async def test_blocks_nest_and_while_is_bounded() -> None:
    text = await render(
        "{for p in people}{if p.age >= 18}{p.name} adult{else}{p.name} minor{/if};{/for}",
        {"people": [{"name": "A", "age": 20}, {"name": "B", "age": 9}]},
    )
    assert text == "A adult;B minor;"
    assert await render("{for x in notalist}x{/for}", {"notalist": "abc"}) == ""
    result = await PromptRenderer().render_template("{while true}.{/while}", None, options())
    assert result.text == "." * 10_000
    assert any("10000 rounds" in w for w in result.warnings)
    assert await render("{repeat -1}x{/repeat}|{repeat 2.7}y{/repeat}") == "|yy"
    assert await render("{if a}{/if}rest", {"a": 1}) == "rest"
    assert await render("{if a}unclosed", {"a": 1}) == "unclosed"  # swallows the rest


async def test_a_bad_block_condition_fails_the_render_but_a_bad_tag_renders_empty() -> None:
    with pytest.raises(TemplateError, match="block header"):
        await render("{if 1 +}x{/if}")
    with pytest.raises(TemplateError, match="Unknown function: nope"):
        await render("{if nope(1)}x{/if}")
    result = await PromptRenderer().render_template("[{nope(1)}]", None, options())
    assert result.text == "[]" and result.warnings == ("{nope(1)}: Unknown function: nope",)


async def test_max_depth() -> None:
    nested = "{if 1}" * 3 + "deep" + "{/if}" * 3
    assert await render(nested) == "deep"
    assert await render(nested, max_depth=3) == ""  # the text sits at depth 3
    assert await render(nested, max_depth=4) == "deep"
    assert await render("{name}", {"name": "x"}, max_depth=0) == "{name}"
    # values are never rendered again
    assert await render("{v}", {"v": "{name}", "name": "x"}) == "{name}"


async def test_reported_names_are_first_seen_and_only_from_tags_that_worked() -> None:
    result = await PromptRenderer().render_template(
        "{b} {a} {b} {date()} {obj.name} {nope(c)} {if flag}{hidden}{/if}",
        {"a": 1, "b": 2, "obj": {"name": "x"}, "flag": False},
        options(),
    )
    assert result.variables == ["b", "a", "date", "obj", "flag"]


async def test_variables_win_over_functions_and_providers_are_called() -> None:
    renderer = PromptRenderer()
    seen: list[tuple[list[str], Any]] = []

    async def shout(args: list[str], variables: Any, configurable: Any) -> str:
        seen.append((args, configurable.get("who")))
        return " ".join(args).upper()

    renderer.register_function_provider("shout", shout)
    renderer.set_variable("static", "S")
    opts = options(configurable={"who": "me"})
    result = await renderer.render_template(
        "{shout('a', 1, xs, null, missing)} {date} {date()} {static}",
        {"xs": [1, 2], "date": "a variable"},
        opts,
    )
    # every argument through String(): arrays joined, null as 'null', undefined as ''
    assert result.text == "A 1 1,2 NULL  a variable 2024-01-02 S"
    assert seen == [(["a", "1", "1,2", "null", ""], "me")]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "{time_UTC()} {time_UTC(8)} {time_UTC('+8')} {time_UTC('-5')}",
            "2024-01-02 03:04:05 2024-01-02 11:04:05 2024-01-02 11:04:05 2024-01-01 22:04:05",
        ),
        ("{time_UTC('x')}", "Invalid UTC offset"),
        ("{timeDiff('2024-01-01T00:00:00Z', '2024-01-02T01:01:30Z')}", "1 day, 1 hour, 1 minute"),
        ("{timeDiff('2024-01-03', '2024-01-01')}", "2 days"),
        (
            "{timeDiff('2024-01-01T00:00:00Z', '2024-01-01T00:00:30Z')} {timeDiff('no', 'date')}",
            "now now",
        ),
        ("{date()} {isodate()} {isotime()} {weekday()}", "2024-01-02 2024-01-02 03:04:05 Tuesday"),
        ("{roll('2d6-1')} {roll('d6')} {roll('2D6')}", "2 NaN 1"),
        ("{random()}", ""),
        ("{random('only')}", "only"),
    ],
)
async def test_builtin_functions(source: str, expected: str) -> None:
    assert await render(source) == expected


async def test_random_pick_and_roll_ranges() -> None:
    for _ in range(30):
        assert 3 <= int(await render("{random(3, 5)}")) <= 5
        assert await render("{random('a,b', 'c')}") in {"a", "b", "c"}
        assert 2 <= int(await render("{roll('2d6')}")) <= 12
        assert 5 <= int(await render("{roll('1d4+4')}")) <= 8
        assert 1 <= int(await render("{roll('20')}")) <= 20
    # pick: one draw of the render's random source per call, as ChatLuna 1.3.36 (no
    # conversation seed, nothing removed)
    draws = iter([0.1, 0.5, 0.9, 0.5])

    class Scripted:
        def random(self) -> float:
            return next(draws)

    env = MacroEnv(clock=lambda: NOW, rng=Scripted())
    result = await PromptRenderer().render_template(
        "{pick('red', 'green', 'blue')} {pick('red,green,blue')} {pick('red', 'green,blue')}"
        " {pick('solo')}",
        None,
        RenderOptions(syntax="chatluna", env=env, configurable={"conversationId": "c1"}),
    )
    assert result.text == "red green blue solo"


async def test_a_registered_function_replaces_a_builtin() -> None:
    renderer = PromptRenderer()
    renderer.register_function_provider("weekday", lambda args, v, c: "Caturday")
    assert (await renderer.render_template("{weekday()}", None, options())).text == "Caturday"
