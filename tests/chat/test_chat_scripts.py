"""STscript on a stored chat (``Tavern.run_script`` / ``chat.script_host``): what a script
changes is in the store, its generations go through the chat service and are admitted one by
one, and a failing script comes back as an outcome, not an exception."""

from __future__ import annotations

import json

from tavernkit.chat.script_host import run_chat_script
from tavernkit.models.chat import Message
from tavernkit.models.quick_reply import QuickReplySet

from ._server import Reply
from .conftest import CARD, World, use_profile


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.tk.store.load_chat(chat_id, owner=world.tk.owner)
    return [Message.model_validate(m.data) for m in stored.messages]


async def test_messages_and_variables_are_stored_as_the_script_goes(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    outcome = await run_chat_script(
        world.chats,
        info.id,
        "/send Hello {{char}} | /sys The ferry sways. | /setvar key=hp 10 | /addvar key=hp 5"
        " | /setglobalvar key=seen yes | /hide 1 | /messages hidden=on 0-2",
    )
    assert outcome.error is None
    assert outcome.pipe == (
        "Mira: Welcome aboard, Ada.\n\nAda: Hello Mira\n\nSystem: The ferry sways."
    )
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages] == ["Welcome aboard, Ada.", "Hello Mira", "The ferry sways."]
    assert messages[1].is_system is True
    assert messages[2].extra.type == "narrator"
    stored = await world.tk.store.load_chat(info.id, owner=world.tk.owner)
    assert stored.header["chat_metadata"]["variables"] == {"hp": 15}
    assert await world.tk.store.get_global_variables(owner=world.tk.owner) == {"seen": "yes"}


async def test_generations_go_through_the_chat_and_are_admitted(world: World) -> None:
    world.server.script(Reply(text="A quiet answer."), Reply(text="Aloud."))
    info = await world.chats.new_chat("Mira")
    admitted: list[int] = []

    async def admit() -> None:
        admitted.append(1)

    outcome = await run_chat_script(
        world.chats,
        info.id,
        "/gen Describe the river. | /setvar key=seen {{pipe}} | /send Go on. | /trigger",
        admit=admit,
    )
    assert outcome.error is None, outcome.error
    assert len(admitted) == 2
    assert world.server.requests[0].body["messages"][-1] == {
        "role": "system",
        "content": "Describe the river.",
    }
    texts = [m.mes for m in await _messages(world, info.id)]
    assert texts == ["Welcome aboard, Ada.", "Go on.", "Aloud."]
    stored = await world.tk.store.load_chat(info.id, owner=world.tk.owner)
    assert stored.header["chat_metadata"]["variables"] == {"seen": "A quiet answer."}


async def test_a_failing_script_is_an_outcome_and_keeps_what_it_did(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    outcome = await run_chat_script(world.chats, info.id, "/setvar key=a 1 | /var nope 2")
    assert outcome.error is not None
    assert outcome.error.message == 'No such variable: "nope"'
    assert (outcome.error.line, outcome.error.column) == (0, 19)
    stored = await world.tk.store.load_chat(info.id, owner=world.tk.owner)
    assert stored.header["chat_metadata"]["variables"] == {"a": "1"}
    unknown = await run_chat_script(world.chats, info.id, "/nosuch")
    assert unknown.error is not None and unknown.error.name == "SlashCommandParserError"


async def test_quick_reply_sets_are_stored_and_bound(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    outcome = await run_chat_script(
        world.chats,
        info.id,
        "/qr-set-create Tools | /qr-create set=Tools label=Roll /pass rolled"
        " | /qr-set-on Tools | /qr-chat-set-on Tools | /run Roll",
    )
    assert outcome.error is None, outcome.error
    assert outcome.pipe == "rolled"
    record = await world.tk.store.get_record("quick_reply_set", "Tools", owner=world.tk.owner)
    stored_set = QuickReplySet.model_validate(record.data)
    assert [(q.label, q.message, q.id) for q in stored_set.qr_list] == [("Roll", "/pass rolled", 2)]
    settings = await world.tk.settings()
    assert settings.selections.quick_reply_sets == ["Default", "Tools"]  # a fresh profile: Default
    chat = await world.tk.store.load_chat(info.id, owner=world.tk.owner)
    assert chat.header["chat_metadata"]["quickReply"] == {
        "setList": [{"set": "Tools", "isVisible": True}]
    }
    # a later script sees the set and its bindings
    again = await run_chat_script(world.chats, info.id, "/qr-set-list global")
    assert again.pipe == '["Default","Tools"]'


async def test_script_injections_stay_in_the_chat_and_reach_the_prompt(world: World) -> None:
    world.server.script(Reply(text="Calm."))
    info = await world.chats.new_chat("Mira")
    await run_chat_script(
        world.chats, info.id, "/inject id=mood position=chat depth=0 role=system Stay calm."
    )
    outcome = await run_chat_script(world.chats, info.id, "/listinjects return=object")
    assert '"mood":{"value":"Stay calm."' in outcome.pipe
    await world.chats.send(info.id, "Hello")
    sent = world.server.requests[-1].body["messages"]
    assert sent[-1] == {"role": "system", "content": "Stay calm."}
    await run_chat_script(world.chats, info.id, "/flushinject mood")
    world.server.script(Reply(text="Fine."))
    await world.chats.send(info.id, "Again")
    assert "Stay calm." not in str(world.server.requests[-1].body["messages"])


async def test_a_quick_reply_file_imports_and_exports_as_sillytavern_writes_it(
    world: World,
) -> None:
    exported = json.dumps(
        {
            "version": 2,
            "name": "Kit",
            "disableSend": False,
            "placeBeforeInput": False,
            "injectInput": False,
            "color": "rgba(0, 0, 0, 0)",
            "onlyBorderColor": False,
            "qrList": [
                {
                    "id": 2,
                    "icon": "",
                    "showLabel": False,
                    "label": "Hi",
                    "title": "",
                    "message": "/echo hi",
                    "contextList": [],
                    "preventAutoExecute": True,
                    "isHidden": False,
                    "executeOnStartup": False,
                    "executeOnUser": False,
                    "executeOnAi": False,
                    "executeOnChatChange": False,
                    "executeOnGroupMemberDraft": False,
                    "executeOnNewChat": False,
                    "executeBeforeGeneration": False,
                    "automationId": "",
                }
            ],
            "idIndex": 2,
        },
        separators=(",", ":"),
    )
    [result] = await world.tk.library.import_bytes(exported.encode(), source="Kit.json")
    assert (result.kind, result.name, result.status) == ("quick_reply_set", "Kit", "imported")
    _, data = await world.tk.library.export_bytes("Kit", "json")
    assert data.decode() == exported
    info = await world.chats.new_chat("Mira")
    outcome = await run_chat_script(world.chats, info.id, "/run Kit.Hi")
    assert outcome.pipe == "hi"


async def test_scripts_reach_the_users_regex_scripts(world: World) -> None:
    """``/send``, ``/sendas`` and ``/regex*`` on a stored chat run the user's global scripts and
    the card's once it is allowed; a toggle is stored in the card."""
    regex = world.tk.regex
    await regex.add(
        {"scriptName": "Colour", "findRegex": "/colour/g", "replaceString": "COLOR",
         "placement": [1, 3], "markdownOnly": False, "promptOnly": False}
    )  # fmt: skip
    card = json.loads(json.dumps(CARD))
    card["data"]["name"] = "Rhea"
    card["data"]["extensions"]["regex_scripts"] = [
        {"id": "c1", "scriptName": "Blade", "findRegex": "/sword/gi", "replaceString": "blade",
         "trimStrings": [], "placement": [3], "markdownOnly": False, "promptOnly": False}
    ]  # fmt: skip
    await world.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json")
    info = await world.chats.new_chat("Rhea")
    script = "/send my colour | /sendas name=Rhea a colour sword | /regex name=blade sword"
    first = await run_chat_script(world.chats, info.id, script)
    assert first.error is None, first.error
    assert first.pipe == "blade"  # /regex finds a card script even before it is allowed
    texts = [m.mes for m in await _messages(world, info.id)]
    assert texts[1:] == ["my COLOR", "a COLOR sword"]  # the card's script is not allowed yet
    await regex.allow_character("Rhea")
    second = await run_chat_script(
        world.chats,
        info.id,
        "/sendas name=Rhea sword | /regex-toggle Blade | /regex-state Blade",
        store_regex_toggle=regex.store_toggle,  # what the facade gives its scripts
    )
    assert second.pipe == "false"
    assert [t.message for t in second.toasts] == ["Regex script 'Blade' has been disabled."]
    assert [m.mes for m in await _messages(world, info.id)][-1] == "blade"
    assert (await regex.character_scripts("Rhea")).scripts[0].disabled is True
    missing = await run_chat_script(world.chats, info.id, "/regex name=nope text")
    assert missing.pipe == "text"
    assert [t.message for t in missing.toasts] == ['Regex script "nope" not found.']


async def test_gen_length_and_stop_on_a_text_completion_model(world: World) -> None:
    """On a text API ``stop=[…]`` joins the request's own stop strings (names, instruct
    sequences) once each, and ``length=`` is the reply's length."""
    await use_profile(world, "textgen", api="text", model="tg-1")
    world.server.script(Reply(text="A heron."))
    info = await world.chats.new_chat("Mira")
    outcome = await run_chat_script(
        world.chats, info.id, '/gen length=12 stop=["##", "\\nAda:"] Name a bird.'
    )
    assert outcome.error is None and outcome.pipe == "A heron."
    body = world.server.requests[-1].body
    assert body["max_tokens"] == 12
    assert body["stop"][-1] == "##" and body["stop"].count("\nAda:") == 1


async def test_a_script_insert_and_cut_keep_the_chats_other_branches(world: World) -> None:
    store, owner = world.tk.store, world.tk.owner
    info = await world.chats.new_chat("Mira")
    lines = [
        {"name": "Ada" if i % 2 else "Mira", "is_user": bool(i % 2), "mes": f"line {i}"}
        for i in range(1, 5)
    ]
    await store.append_messages(info.id, lines, owner=owner)
    branch = await store.fork_chat(info.id, 3, owner=owner)
    await store.append_message(info.id, {"name": "Mira", "mes": "other 3"}, owner=owner)
    await store.switch_branch(info.id, "main", owner=owner)

    outcome = await run_chat_script(world.chats, info.id, "/send at=1 Inserted | /cut 4")
    assert outcome.error is None
    texts = ["Welcome aboard, Ada.", "Inserted", "line 1", "line 2", "line 4"]
    assert [m.mes for m in await _messages(world, info.id)] == texts
    tree = await store.chat_tree(info.id, owner=owner)
    assert {b.id: b.fork for b in tree.branches} == {"main": 0, branch: 4}
    await store.switch_branch(info.id, branch, owner=owner)
    assert [m.mes for m in await _messages(world, info.id)] == [*texts[:4], "other 3"]
