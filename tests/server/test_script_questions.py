"""Scripts that ask the user over HTTP: ``"interactive": true`` answers each question of
``/input``, ``/popup`` and ``/buttons``, ``POST …/script/runs/{run}/answer`` brings the answer
back; the run is its starter's alone, and an unanswered question is cancelled in time."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2 as httpx
import pytest

from tavernkit.chat.script_host import ScriptOutcome
from tavernkit.server.script_runs import ScriptRuns
from tavernkit.stscript import Answer, Asker, Question

from ._cards import card_file
from .conftest import Users


async def _chat(client: httpx.AsyncClient) -> str:
    r = await client.post("/import", files={"file": card_file("Mira")})
    assert r.status_code == 201, r.text
    r = await client.post("/chats", json={"character": "Mira"})
    assert r.status_code == 201, r.text
    chat: str = r.json()["id"]
    return chat


async def _start(client: httpx.AsyncClient, chat: str, script: str) -> dict[str, Any]:
    r = await client.post(f"/chats/{chat}/script", json={"script": script, "interactive": True})
    assert r.status_code == 200, r.text
    step: dict[str, Any] = r.json()
    return step


async def _answer(
    client: httpx.AsyncClient, chat: str, step: dict[str, Any], **answer: Any
) -> httpx.Response:
    url = f"/chats/{chat}/script/runs/{step['run']}/answer"
    return await client.post(url, json={"question": step["question"]["id"], **answer})


async def _last_text(client: httpx.AsyncClient, chat: str) -> str:
    messages = (await client.get(f"/chats/{chat}/messages")).json()
    items = messages["items"] if isinstance(messages, dict) else messages
    text: str = items[0]["data"]["mes"]  # newest first
    return text


async def test_the_script_asks_and_the_answer_reaches_its_pipe(users: Users) -> None:
    ann = users.ann
    chat = await _chat(ann)
    step = await _start(
        ann,
        chat,
        "/input default=Bo okButton=Go Your name? | /sendas name=Mira Hello {{pipe}} | "
        '/buttons labels=["Fight","Flee"] What now? | /popup result=true Sure? | '
        "/pass {{pipe}}",
    )
    assert step["status"] == "asking"
    question = step["question"]
    assert question["kind"] == "input" and question["text"] == "Your name?"
    assert question["default"] == "Bo"
    assert question["ok_button"] == "Go" and question["id"] == 1
    r = await _answer(ann, chat, step, button="ok", text="Ada")
    assert r.status_code == 200, r.text
    step = r.json()
    assert step["question"]["kind"] == "buttons"
    assert step["question"]["labels"] == ["Fight", "Flee"]
    assert await _last_text(ann, chat) == "Hello Ada"  # the first part ran and is stored
    step = (await _answer(ann, chat, step, button="ok", chosen=[1])).json()
    assert step["question"]["kind"] == "popup"
    done = (await _answer(ann, chat, step, button="cancel")).json()
    assert done["status"] == "done" and done["pipe"] == "0" and done["error"] is None


async def test_without_interactive_no_one_is_asked(users: Users) -> None:
    ann = users.ann
    chat = await _chat(ann)
    script = '/input default=Bo Name? | /sendas name=Mira Hello {{pipe}} | /buttons labels=["a"] x'
    r = await ann.post(f"/chats/{chat}/script", json={"script": script})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "done" and r.json()["pipe"] == ""
    assert await _last_text(ann, chat) == "Hello Bo"


async def test_a_quick_reply_click_asks_too(users: Users) -> None:
    ann = users.ann
    chat = await _chat(ann)
    qr_set = {
        "version": 2,
        "name": "Scene",
        "qrList": [
            {"id": 1, "label": "Ask", "message": "/input Who? | /sendas name=Mira {{pipe}}"}
        ],
    }
    assert (await ann.post("/quick-replies", json=qr_set)).status_code == 201
    r = await ann.post(
        f"/chats/{chat}/quick-replies/click",
        json={"set": "Scene", "label": "Ask", "interactive": True},
    )
    step = r.json()
    assert step["status"] == "asking" and step["question"]["text"] == "Who?"
    done = (await _answer(ann, chat, step, button="ok", text="Rhea")).json()
    assert done["status"] == "done"
    assert await _last_text(ann, chat) == "Rhea"


async def test_another_user_cannot_answer_and_a_question_is_answered_once(users: Users) -> None:
    ann, bob = users.ann, users.bob
    chat = await _chat(ann)
    bobs_chat = await _chat(bob)
    step = await _start(ann, chat, "/input Secret? | /setvar key=got {{pipe}}")
    for client, where in ((bob, chat), (bob, bobs_chat), (ann, bobs_chat)):
        r = await _answer(client, where, step, button="ok", text="stolen")
        assert r.status_code == 404, r.text
        assert r.json()["error"]["type"] == "NotFound"
    wrong = {**step, "question": {**step["question"], "id": 2}}
    assert (await _answer(ann, chat, wrong, button="ok", text="x")).status_code == 404
    done = await _answer(ann, chat, step, button="ok", text="mine")
    assert done.json()["status"] == "done"
    assert (await _answer(ann, chat, step, button="ok", text="again")).status_code == 404
    got = (await ann.get(f"/chats/{chat}/variables")).json()
    assert "mine" in str(got) and "stolen" not in str(got)


@pytest.mark.parametrize("users", [{"script_answer_timeout_s": 0.3}], indirect=True)
async def test_an_unanswered_question_is_cancelled_after_the_timeout(users: Users) -> None:
    assert users.server.state.script_runs.timeout_s == 0.3  # the server setting reached them
    ann = users.ann
    chat = await _chat(ann)
    step = await _start(
        ann, chat, "/input default=Bo Name? | /setvar key=got [{{pipe}}] | /pass {{pipe}}"
    )
    assert step["status"] == "asking"
    for _ in range(50):
        await asyncio.sleep(0.1)
        got = (await ann.get(f"/chats/{chat}/variables")).json()
        if "[]" in str(got):
            break
    assert "[]" in str(got)  # cancelled: /input returned ''
    late = await _answer(ann, chat, step, button="ok", text="late")
    assert late.status_code == 404


async def test_a_reloaded_page_finds_its_open_question_and_answers_it(users: Users) -> None:
    """The page that asked is gone (a reload): ``GET …/script/runs`` gives the run and its
    question again, the starter's only, and answering it there goes on with the script."""
    ann, bob = users.ann, users.bob
    chat = await _chat(ann)
    bobs_chat = await _chat(bob)
    assert (await ann.get(f"/chats/{chat}/script/runs")).json() == {"runs": []}
    step = await _start(ann, chat, "/input default=Bo Name? | /sendas name=Mira Hi {{pipe}}")
    r = await ann.get(f"/chats/{chat}/script/runs")
    assert r.status_code == 200, r.text
    assert r.json() == {"runs": [step]}  # the same run, the same question
    refused = await bob.get(f"/chats/{chat}/script/runs")
    assert refused.status_code == 404 and refused.json()["error"]["type"] == "NotFound"
    assert (await bob.get(f"/chats/{bobs_chat}/script/runs")).json() == {"runs": []}
    assert (await ann.get(f"/chats/{bobs_chat}/script/runs")).status_code == 404
    (listed,) = (await ann.get(f"/chats/{chat}/script/runs")).json()["runs"]
    done = (await _answer(ann, chat, listed, button="ok", text="Ada")).json()
    assert done["status"] == "done"
    assert await _last_text(ann, chat) == "Hi Ada"
    assert (await ann.get(f"/chats/{chat}/script/runs")).json() == {"runs": []}


async def test_a_question_no_request_took_is_answered_once() -> None:
    """A request that left before it took the question (the page reloaded at once) leaves
    it queued: the answer from the listing gets the step after it, not the same question."""
    runs = ScriptRuns(timeout_s=30)

    async def work(ask: Asker) -> ScriptOutcome:
        first = await ask(Question("input", "One?"))
        second = await ask(Question("input", "Two?"))
        return ScriptOutcome(pipe=f"{first.text}+{second.text}")

    run = runs.start("ann", "c1", work)
    for _ in range(100):
        if await runs.pending("ann", "c1"):
            break
        await asyncio.sleep(0.01)
    (asking,) = await runs.pending("ann", "c1")
    assert asking["question"]["text"] == "One?" and await runs.pending("bob", "c1") == []
    run.answer(asking["question"]["id"], Answer("ok", "a"))
    step = await runs.next_step(run)
    assert step["status"] == "asking" and step["question"]["text"] == "Two?"
    run.answer(step["question"]["id"], Answer("ok", "b"))
    done = await runs.next_step(run)
    assert done["status"] == "done" and done["pipe"] == "a+b"
    assert await runs.pending("ann", "c1") == []
