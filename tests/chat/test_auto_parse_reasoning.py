"""SillyTavern's "Parse reasoning" (``reasoning.auto_parse``) on a chat turn: it works on a fresh
home (the reasoning templates SillyTavern ships resolve by name, none imported), it splits the
reply live as it streams whatever the model's reasoning format, and a stored template of the
same name wins over the built-in one."""

from __future__ import annotations

from tavernkit.generation.sink import RecordingSink
from tavernkit.models.chat import Message
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.providers.events import ReasoningDelta, TextDelta

from ._server import Reply
from .conftest import World


async def _settings(world: World, *, auto_parse: bool = True, template: str | None = None) -> None:
    settings = await world.tk.settings()
    settings.reasoning.auto_parse = auto_parse
    if template is not None:
        settings.reasoning.template = template
    await world.tk.store.put_settings(settings)


async def _last_message(world: World, chat_id: str) -> Message:
    stored = await world.chats.load(chat_id)
    return Message.model_validate(stored.messages[-1].data)


def _delivered(sink: RecordingSink) -> list[tuple[str, str]]:
    """What the sink was given while the reply streamed: (kind, text), in order."""
    out: list[tuple[str, str]] = []
    for event in sink.events:
        if isinstance(event, ReasoningDelta) and event.text:
            out.append(("reasoning", event.text))
        elif isinstance(event, TextDelta) and event.text:
            out.append(("text", event.text))
    return out


def _kinds(sink: RecordingSink) -> list[str]:
    kinds = [kind for kind, _ in _delivered(sink)]
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


async def test_a_fresh_home_splits_think_tags_live_with_auto_parse(world: World) -> None:
    assert await world.tk.store.list("reasoning", owner=world.tk.owner) == []
    await _settings(world)
    world.server.script(Reply(chunks=["<thi", "nk>pl", "an</th", "ink>Hel", "lo"]))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hi", sink=sink)
    assert out.status == "completed", out.error
    # split as it streamed: the sink got the reasoning first, then only the clean reply
    assert _kinds(sink) == ["reasoning", "text"]
    assert "".join(t for k, t in _delivered(sink) if k == "reasoning") == "plan"
    assert sink.text == "Hello"
    assert (out.text, out.reasoning) == ("Hello", "plan")
    reply = await _last_message(world, info.id)
    assert (reply.mes, reply.extra.reasoning) == ("Hello", "plan")


async def test_a_fresh_home_knows_the_deepseek_template_by_name(world: World) -> None:
    await _settings(world, template="DeepSeek")
    text = "<think>\nweigh the tide\n</think>\n\nThe ferry waits."
    world.server.script(Reply(text=text))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hi", sink=sink)
    assert _kinds(sink) == ["reasoning", "text"]
    assert (out.text, out.reasoning) == ("The ferry waits.", "weigh the tide")


async def test_a_stored_template_wins_over_the_built_in_of_its_name(world: World) -> None:
    mine = ReasoningTemplate(name="Think XML", prefix="<reason>", suffix="</reason>")
    await world.tk.store.put("reasoning", mine)
    await _settings(world)
    world.server.script(Reply(chunks=["<reason>", "plan", "</reason>", "Hello"]))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hi", sink=sink)
    assert _kinds(sink) == ["reasoning", "text"]
    assert (out.text, out.reasoning) == ("Hello", "plan")


async def test_without_auto_parse_a_fresh_home_leaves_the_text_alone(world: World) -> None:
    await _settings(world, auto_parse=False)
    world.server.script(Reply(text="<think>plan</think>Hello"))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hi")
    assert (out.text, out.reasoning) == ("<think>plan</think>Hello", "")


async def test_the_blank_template_parses_nothing(world: World) -> None:
    await _settings(world, template="Blank")
    world.server.script(Reply(text="<think>plan</think>Hello"))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hi")
    assert (out.text, out.reasoning) == ("<think>plan</think>Hello", "")


async def test_reasoning_sent_in_a_field_leaves_the_text_unparsed(world: World) -> None:
    # SillyTavern auto-parses the text only of a reply whose reasoning did not arrive in a field
    await _settings(world)
    world.server.script(Reply(reasoning="native thoughts", text="<think>x</think>Hello"))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hi")
    assert (out.text, out.reasoning) == ("<think>x</think>Hello", "native thoughts")
