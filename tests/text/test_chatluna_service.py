"""``ChatLunaRenderService``: the brief's ChatLuna renderer API (document 002) and the behaviours
of ChatLuna 1.3.36 it reproduces (the conformance goldens check them case by case; these say
each one in a line)."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tavernkit.errors import TemplateError
from tavernkit.formats.chatluna import read_chatluna_preset
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render import ChatLunaRenderService, PromptRenderer, RenderOptions, UrlPolicy

NOW = datetime(2025, 3, 9, 18, 30, 45, 123000, tzinfo=UTC)


class Draws:
    """A scripted ``Math.random``."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def service(*draws: float, tz: str = "Asia/Shanghai", **kw: Any) -> ChatLunaRenderService:
    rng: Any = Draws(*draws) if draws else random.Random(1)
    return ChatLunaRenderService(env=MacroEnv(clock=lambda: NOW, tz=ZoneInfo(tz), rng=rng), **kw)


async def text(source: str, variables: Mapping[str, Any] | None = None) -> str:
    return (await service().render_template(source, variables)).text


def echo(args: list[str], variables: Mapping[str, Any], configurable: Any) -> str:
    return "|".join(args)


# -- the API ----------------------------------------------------------------------------------


async def test_render_template_speaks_chatluna_without_options() -> None:
    result = await service().render_template(
        "Hello {name}! {if n > 1}many{/if}", {"name": "Ada", "n": 2}
    )
    assert (result.text, result.variables) == ("Hello Ada! many", ["name", "n"])


async def test_function_providers_register_replace_and_dispose() -> None:
    renderer = service()
    first = renderer.register_function_provider("f", echo)
    assert (await renderer.render_template("{f('a', 'b')}")).text == "a|b"
    renderer.register_function_provider("f", lambda args, v, c: "".join(args))
    assert (await renderer.render_template("{f('a', 'b')}")).text == "ab"
    first()  # as ChatLuna: a disposer removes whatever the name holds now
    assert (await renderer.render_template("[{f('a')}]")).text == "[]"
    # a registered provider replaces a built-in
    renderer.register_function_provider("weekday", lambda args, v, c: "Caturday")
    assert (await renderer.render_template("{weekday()}")).text == "Caturday"


async def test_static_variables_and_variable_providers() -> None:
    renderer = service()
    assert renderer.get_variable("x") is None
    renderer.set_variable("x", "static")
    assert renderer.get_variable("x") == "static"
    assert (await renderer.render_template("{x}")).text == "static"
    assert (await renderer.render_template("{x}", {"x": "call"})).text == "call"
    counter = iter(range(10))
    dispose = renderer.register_variable_provider(lambda: {"x": "provided", "n": next(counter)})
    assert (await renderer.render_template("{x} {n}{n}")).text == "provided 00"  # once a render
    assert (await renderer.render_template("{n}")).text == "1"
    dispose()
    dispose()
    renderer.remove_variable("x")
    assert (await renderer.render_template("[{x}]")).text == "[]"


async def test_provider_order_and_per_call_extensions() -> None:
    renderer = service()
    renderer.register_variable_provider(lambda: {"name": "registered"})
    options = RenderOptions(
        extensions=([lambda: {"name": "per-call"}], {"echo": lambda args, v, c: "call"}),
        configurable={"conversationId": "c1"},
    )
    renderer.register_function_provider("echo", echo)
    result = await renderer.render_template("{name} {echo(1)}", {"name": "call"}, options)
    assert result.text == "per-call call"


async def test_a_provider_returning_none_or_an_awaitable_adds_nothing_one_raising_fails() -> None:
    renderer = service()
    renderer.register_variable_provider(lambda: None)

    async def later() -> dict[str, str]:
        return {"late": "x"}

    renderer.register_variable_provider(later)
    assert (await renderer.render_template("[{name}][{late}]", {"name": "kept"})).text == "[kept][]"

    def boom() -> dict[str, str]:
        raise RuntimeError("provider boom")

    renderer.register_variable_provider(boom)
    with pytest.raises(TemplateError, match="provider boom"):
        await renderer.render_template("{name}")


async def test_render_messages_renders_each_message_as_chatluna_1_3_36() -> None:
    renderer = service()
    counter = iter(range(10))
    renderer.register_variable_provider(lambda: {"n": next(counter)})
    messages = [
        {"type": "system", "content": "You are {name}. {n}", "additional_kwargs": {"k": 1}},
        {
            "type": "human",
            "content": [{"type": "text", "text": "hi {name} "}, {"type": "image_url"}],
            "name": "ada",
            "id": "m1",
        },
        {"role": "assistant", "content": "{n}"},
    ]
    out = await renderer.render_messages(messages, {"name": "Ada"})
    assert out == [
        {"type": "system", "content": "You are Ada. 0", "additional_kwargs": {"k": 1}},
        {"type": "human", "content": "hi Ada ", "additional_kwargs": {}},
        {"type": "ai", "content": "2", "additional_kwargs": {}},
    ]
    with pytest.raises(TypeError, match="tool"):
        await renderer.render_messages([{"type": "tool", "content": "x"}])


async def test_render_preset_template_reports_names_in_finishing_order() -> None:
    preset = read_chatluna_preset(
        b"keywords: [p]\n"
        b"prompts:\n"
        b"  - role: system\n    type: description\n    content: |\n      {a} {b} {c()} {d}\n"
        b"  - role: assistant\n    content: '  {e}  '\n",
        "p.yml",
    )
    renderer = service()
    renderer.register_function_provider("c", echo)
    result = await renderer.render_preset_template(preset, {"a": 1, "b": 2, "d": 4, "e": 5})
    assert result.messages == [
        {"type": "system", "content": "1 2  4", "additional_kwargs": {"type": "description"}},
        {"type": "ai", "content": "5", "additional_kwargs": {}},
    ]
    # the short second prompt finishes first in ChatLuna's concurrent render
    assert result.variables == ["e", "a", "b", "c", "d"]


async def test_concurrent_renders_call_providers_in_chatluna_order() -> None:
    # ChatLuna renders every message at once: the second message's call comes first (fewer
    # promise ticks before it), and one waiting on a timer lets the others finish first
    renderer = service()
    counter = iter(range(1, 10))
    renderer.register_function_provider("seq", lambda args, v, c: str(next(counter)))

    async def slow(args: list[str], variables: Any, configurable: Any) -> str:
        await asyncio.sleep(0.005)
        return "slow"

    renderer.register_function_provider("slow", slow)
    out = await renderer.render_messages(
        [
            {"type": "system", "content": "{name}{seq()}"},
            {"type": "human", "content": "{seq()}"},
            {"type": "ai", "content": "{slow()}{seq()}"},
            {"type": "human", "content": "{seq()}{seq()}"},
        ],
        {"name": "Ada"},
    )
    assert [m["content"] for m in out] == ["Ada3", "1", "slow5", "24"]


async def test_a_failing_render_among_concurrent_ones_fails_the_call_without_hanging() -> None:
    renderer = service()
    renderer.register_function_provider("seq", lambda args, v, c: "s")
    messages = [
        {"type": "human", "content": "{seq()}{seq()}"},
        {"type": "ai", "content": "{if nosuch()}x{/if}"},
        {"type": "system", "content": "{seq()}"},
    ]
    with pytest.raises(TemplateError, match="Unknown function: nosuch"):
        await asyncio.wait_for(renderer.render_messages(messages), timeout=10)


def test_preset_prompts_are_trimmed_at_import() -> None:
    preset = read_chatluna_preset(
        b"keywords: [p]\nprompts:\n  - role: user\n    content: |+\n      hi\n\n", "p.yml"
    )
    assert preset.prompts[0].content == "hi"


# -- ChatLuna 1.3.36's behaviour ----------------------------------------------------------------


async def test_reported_names_follow_the_expression_tree() -> None:
    result = await service().render_template(
        "{t ? a : b} {upper(name)} {items[i]} {obj.name}",
        {"t": True, "a": 1, "b": 2, "name": "x", "items": [1], "i": 0, "obj": {}},
        RenderOptions(extensions=([], {"upper": lambda args, v, c: args[0].upper()})),
    )
    assert result.variables == ["t", "a", "b", "upper", "name", "items", "i", "obj"]


async def test_pick_and_random_draw_from_the_random_source() -> None:
    renderer = service(0.61, 0.99, 0.5, 0.2)
    result = await renderer.render_template(
        "{pick('a', 'b', 'c')} {pick('a,b,c')} {random(1, 6)} {random()}|",
        None,
        RenderOptions(configurable={"conversationId": "c1"}),
    )
    assert result.text == "b c 4 |"


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("2024-01-01", "2024-01-01T00:00:00", "8 hours"),  # a date is UTC, a date-time local
        ("2024/01/01", "2024/01/02 12:30", "1 day, 12 hours, 30 minutes"),
        ("Jan 1, 2024", "Feb 1, 2024", "31 days"),
        ("3/10/2025, 2:30:45 AM", "2025-01-01", "67 days, 18 hours, 30 minutes"),
        ("2025/3/10 02:30:45", "2025-01-01", "67 days, 18 hours, 30 minutes"),
        ("2024-01-01T00:00:00+08:00", "2024-01-01T00:00:00Z", "8 hours"),
        ("Tue Jan 02 2024 10:00:00 GMT+0800 (China Standard Time)", "2024-01-01", "1 day, 2 hours"),
        ("2023-02-31", "2023-03-03", "now"),  # V8 takes day 31 of any month
        ("2025/3/10 下午2:30:45", "2024-01-01", "now"),  # an unknown word after a number
        ("not a date", "2024-01-01", "now"),
    ],
)
async def test_time_diff_reads_the_date_shapes_javascript_reads(
    first: str, second: str, expected: str
) -> None:
    assert await text("{timeDiff(a, b)}", {"a": first, "b": second}) == expected


async def test_time_utc_prints_years_past_9999_as_javascript() -> None:
    assert await text("{time_UTC(100000000)}") == "+013433-02-18 10:30:45"
    assert await text("{time_UTC('0x10')}") == "2025-03-10 10:30:45"


async def test_function_valued_variables_are_called_at_every_reference() -> None:
    ticks = iter(range(1, 10))
    assert await text("{t} {t} {t}", {"t": lambda: f"tick{next(ticks)}"}) == "tick1 tick2 tick3"


async def test_methods_reached_through_member_access_are_called() -> None:
    variables = {"name": "Ada", "items": ["a", "b", "c"], "pi": 3.14159, "user": {}}
    assert await text(
        "{name.toUpperCase} {items.join} {pi.toFixed} {user.toString}", variables
    ) == ("ADA a,b,c 3 [object Object]")
    assert await text("[{name.toUpperCase()}]", variables) == "[]"  # "ADA" is not callable
    renderer = service()
    renderer.register_function_provider("echo", echo)
    shifted = await renderer.render_template("{echo(items.shift, items)}", variables)
    assert shifted.text == "a|b,c"  # shift() changed the array the next argument reads
    assert await text("[{constructor}] [{toString}]") == "[[object Object]] [[object Undefined]]"
    # a method's own result stays as it is: ''.at() is undefined, and -1 < undefined is false
    assert await text("{-1 < empty.at} {-1 < empty.missing}", {"empty": ""}) == "false true"
    assert await text("{name.bold} {items.keys}", variables) == "<b>Ada</b> [object Array Iterator]"


async def test_lengths_are_utf16_units_and_unicode_spaces_separate_tokens() -> None:
    assert await text("{e.length}", {"e": "😀🎉"}) == "4"
    assert await text("{\u3000name\u3000+\ufeffname}", {"name": "Ada"}) == "AdaAda"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{if f}a{else}b{elseif t}c{/if}", "c"),  # an elseif after else is one more elseif
        ("{if f}a{else}b{else}c{/if}", "c"),  # a second else starts the alternative afresh
        ("{if f}a{elseif f}b{/if}", ""),
        ("[{else}] {/if}", "[] {/if}"),  # outside an if: a name, and text
    ],
)
async def test_elseif_corners(source: str, expected: str) -> None:
    assert await text(source, {"t": True, "f": False}) == expected


async def test_loop_variables_are_visible_to_function_providers() -> None:
    renderer = service()
    renderer.register_function_provider("get", lambda args, v, c: str(v.get(args[0])))
    result = await renderer.render_template("{for x in xs}{get('x')}{/for}", {"xs": ["a", "b"]})
    assert result.text == "ab"


async def test_numbers_print_as_javascript_prints_them() -> None:
    assert await text(
        "{0.1 + 0.2} {big} {1 / 0} {0 / 0} {7 % -3}", {"big": 12345678901234567890}
    ) == ("0.30000000000000004 12345678901234567000 Infinity NaN 1")


async def test_deep_parentheses_and_long_sums_do_not_exhaust_the_stack() -> None:
    deep = "{" + "(" * 300 + "n" + ")" * 300 + "}"
    assert await text(deep, {"n": 5}) == "5"
    assert await text("{" + " + ".join(str(n) for n in range(2000)) + "}") == str(sum(range(2000)))


async def test_an_infinite_repeat_is_refused() -> None:
    result = await service().render_template("[{repeat 1 / 0}x{/repeat}]")
    assert result.text == "[]"
    assert any("infinite" in warning for warning in result.warnings)


# -- url() --------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._send("L" * 1200 + "TAIL")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._send("POST " + self.rfile.read(length).decode())

    def _send(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_url_cuts_at_its_fourth_argument_or_1000_characters(base_url: str) -> None:
    policy = UrlPolicy(enabled=True, allowed_hosts=frozenset({"127.0.0.1"}), allow_private=True)
    renderer = service(url=policy)

    async def render(source: str) -> str:
        return (await renderer.render_template(source, {"base": base_url})).text

    assert len(await render("{url('GET', base + '/long')}")) == 1000
    assert await render("{url('POST', base, 'x', '3')}") == "POS"
    assert len(await render("{url('POST', base, 'x', 'abc')}")) == len("POST x")
    assert await render("[{url('GET', base, 'a body')}]") == "[]"  # GET cannot carry a body
    # the general renderer's chatluna syntax has ChatLuna's url() too (the macros' takes a
    # timeout as its fourth argument)
    general = PromptRenderer(url=policy)
    cut = await general.render_template(
        "{url('POST', base, 'x', '3')}", {"base": base_url}, RenderOptions(syntax="chatluna")
    )
    assert cut.text == "POS"
    # off by default: a template that can fetch is a request-forgery hole
    assert (await service().render_template("[{url('GET', b)}]", {"b": base_url})).text == "[]"
