"""Regex scripts in chat turns: what is stored after a send and a reply, what the prompt
carries, what is shown, a card's scripts off until allowed, edits, impersonation, greetings
and SillyTavern's continue quirk under compat ``st-1.18``."""

from __future__ import annotations

import json
from typing import Any

from tavernkit.models.chat import Message

from ._server import Reply
from .conftest import CARD, World


def rx(name: str, find: str, replace: str, **fields: Any) -> dict[str, Any]:
    return {
        "scriptName": name,
        "findRegex": find,
        "replaceString": replace,
        "placement": fields.pop("placement", [1, 2]),
        "markdownOnly": fields.pop("markdownOnly", False),
        "promptOnly": fields.pop("promptOnly", False),
        **fields,
    }


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data) for m in stored.messages]


def _sent(world: World) -> list[dict[str, Any]]:
    body = world.server.requests[-1].body
    return list(body["messages"])


async def test_stored_prompt_and_display_texts(world: World) -> None:
    regex = world.tk.regex
    await regex.add(rx("user_store", "/colour/g", "color", placement=[1]))
    await regex.add(rx("user_prompt", "/please/g", "PLEASE", placement=[1], promptOnly=True))
    await regex.add(rx("user_show", "/red/g", "*red*", placement=[1], markdownOnly=True))
    await regex.add(rx("ai_store", "/Fixed/g", "Stored", placement=[2]))
    await regex.add(rx("ai_show", "/oracle/g", "**oracle**", placement=[2], markdownOnly=True))
    world.server.script(Reply(text="Fixed oracle reply."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "the colour red, please")
    assert out.status == "completed", out.error
    assert out.text == "Stored oracle reply."
    messages = await _messages(world, info.id)
    assert [m.text for m in messages[1:]] == ["the color red, please", "Stored oracle reply."]
    assert _sent(world)[-1]["content"] == "the color red, PLEASE"
    stored = await world.chats.load(info.id)
    shown = await world.chats.shown(info.id, stored.messages)
    assert shown[1].text == "the color *red*, please"
    assert shown[2].text == "Stored **oracle** reply."
    assert 0 not in shown  # the greeting shows as stored


async def test_a_cards_scripts_run_once_allowed(world: World) -> None:
    card = json.loads(json.dumps(CARD))
    card["data"]["name"] = "Rhea"
    card["data"]["extensions"]["regex_scripts"] = [
        {**rx("Card Script", "/sword/gi", "blade"), "id": "c1", "trimStrings": []},
        {**rx("Card Prompt", "/$/", " [card]", promptOnly=True), "id": "c2", "trimStrings": []},
    ]
    await world.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json")
    found = await world.tk.regex.character_scripts("Rhea")
    assert [s.script_name for s in found.scripts] == ["Card Script", "Card Prompt"]
    assert not found.allowed
    world.server.script(Reply(text="A SWORD!"))
    info = await world.chats.new_chat("Rhea")
    await world.chats.send(info.id, "my sword")
    assert [m.text for m in (await _messages(world, info.id))[1:]] == ["my sword", "A SWORD!"]
    assert "[card]" not in json.dumps(_sent(world))

    await world.tk.regex.allow_character("Rhea")
    await world.chats.send(info.id, "my sword")
    texts = [m.text for m in (await _messages(world, info.id))[1:]]
    assert texts[2:] == ["my blade", "A blade!"]
    assert _sent(world)[-1]["content"] == "my blade [card]"


async def test_edit_impersonate_and_greeting(world: World) -> None:
    regex = world.tk.regex
    await regex.add(rx("edit", "/x/g", "EDIT", placement=[2], runOnEdit=True))
    await regex.add(rx("no_edit", "/y/g", "Y", placement=[2], runOnEdit=False))
    await regex.add(rx("user", "/Fixed/g", "USERSIDE", placement=[1], runOnEdit=False))
    await regex.add(rx("ai", "/Fixed/g", "AISIDE", placement=[2], runOnEdit=False))
    await regex.add(rx("greet", "/aboard/g", "on board", placement=[2], runOnEdit=False))
    info = await world.chats.new_chat("Mira")
    greeting = (await _messages(world, info.id))[0]
    assert greeting.text == "Welcome on board, Ada."
    assert greeting.swipes is not None and greeting.swipes[1] == "Mind the gap, Ada."
    edited = await world.chats.edit(info.id, 0, "x and y")
    assert edited.text == "EDIT and y"
    world.server.script(Reply(text="Fixed reply"))
    out = await world.chats.impersonate(info.id)
    assert out.text == "USERSIDE reply"


async def test_continue_keeps_the_stored_text_unless_compat_st_118(world: World) -> None:
    await world.tk.regex.add(rx("d0", "/$/", " <d0>", promptOnly=True, maxDepth=0))
    info = await world.chats.new_chat("Mira")
    world.server.script(Reply(text="Fixed."))
    await world.chats.send(info.id, "go")
    world.server.script(Reply(text="More."))
    await world.chats.continue_(info.id)
    assert (await _messages(world, info.id))[-1].text == "Fixed. More."
    settings = await world.tk.settings()
    settings.compat = "st-1.18"
    await world.tk.store.put_settings(settings)
    world.server.script(Reply(text="Again."))
    await world.chats.continue_(info.id)
    # SillyTavern stores the continuation after the message's prompt text (d0 applied)
    assert (await _messages(world, info.id))[-1].text == "Fixed. More. <d0> Again."


async def test_the_extension_switch_stops_every_script(world: World) -> None:
    await world.tk.regex.add(rx("up", "/go/g", "GO"))
    await world.tk.regex.set_extension_enabled(False)
    world.server.script(Reply(text="ok"))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "go")
    assert (await _messages(world, info.id))[1].text == "go"


async def test_the_command_hooks_run_and_store_toggles_where_scripts_live(world: World) -> None:
    await world.tk.regex.add(rx("Shout", "/\\w+/g", "{{match}}, {{char}}!", placement=[]))
    card = json.loads(json.dumps(CARD))
    card["data"]["name"] = "Rhea"
    card["data"]["extensions"]["regex_scripts"] = [
        {**rx("Card Script", "/sword/gi", "blade"), "id": "c1", "trimStrings": []}
    ]
    await world.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json")
    info = await world.chats.new_chat("Rhea")
    regex = world.tk.regex
    ran = await regex.command("regex", chat_id=info.id, script="shout", text="hi")
    assert ran.output == "hi, Rhea!" and not ran.notices  # the chat's macros
    assert (await regex.command("regex-state", chat_id=info.id, script="card script")).output == (
        "true"
    )
    toggled = await regex.command("regex-toggle", chat_id=info.id, script="Card Script")
    assert toggled.output == "Card Script" and toggled.scope == "scoped"
    assert (await regex.character_scripts("Rhea")).scripts[0].disabled is True  # in the card
    await regex.command("regex-toggle", script="Shout", state="off", quiet=True)
    assert (await regex.get("Shout")).disabled is True
    missing = await regex.command("regex-state", script="Nope")
    assert missing.output == "" and missing.notices[0].message == 'Regex script "Nope" not found.'
