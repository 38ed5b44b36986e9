"""A Raw summary on a text-completion profile sends what SillyTavern's ``generateRaw`` sends
there (``createRawPrompt``): the instruct/context-formatted prompt, not chat messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chat._server import HangingServer, Reply
from chat.conftest import make_world
from tavernkit.assist.summary import summarize
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.templates import InstructTemplate

#: SillyTavern's ChatML instruct template (its story-string wrapper included)
CHATML = InstructTemplate(
    name="ChatML",
    input_sequence="<|im_start|>user",
    output_sequence="<|im_start|>assistant",
    system_sequence="<|im_start|>system",
    input_suffix="<|im_end|>\n",
    output_suffix="<|im_end|>\n",
    system_suffix="<|im_end|>\n",
    stop_sequence="<|im_end|>",
    story_string_prefix="<|im_start|>system",
    story_string_suffix="<|im_end|>\n",
)
#: SillyTavern's Alpaca: its story string is not a system message (no sequence of its own)
ALPACA = InstructTemplate(
    name="Alpaca",
    input_sequence="### Instruction:",
    output_sequence="### Response:",
    system_sequence="### Input:",
    input_suffix="\n\n",
    output_suffix="\n\n",
    system_suffix="\n\n",
    story_string_suffix="\n\n",
)
LINES = [("Mira", "The tide is in."), ("Ada", "Then we wait."), ("Mira", "Until nine.")]


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[Tavern, HangingServer]]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        profile = ConnectionProfile(
            name="textgen",
            api="text",
            source="openai",
            base_url=server.base_url + "/v1",
            model="tg-1",
        )
        await tk.store.put("connection_profile", profile, owner=tk.owner)
        settings = await tk.settings()
        settings.selections.profile = "textgen"
        summary = settings.memory.summary
        summary.source, summary.prompt_interval, summary.prompt_builder = "main", 2, 1
        summary.prompt = "Summarize {{char}}'s story."
        await tk.store.put_settings(settings)
        try:
            yield tk, server
        finally:
            await tk.close()


async def _summary_request(
    tk: Tavern, server: HangingServer, *, instruct: bool, template: InstructTemplate = CHATML
) -> tuple[str, str]:
    """The prompt the summary sent, and the Raw builder's entries: every message but the
    last (the card's greeting first), ``Name:\\ntext``, joined by a blank line."""
    await tk.store.put("instruct", template, name=template.name)
    settings = await tk.settings()
    settings.prompt.instruct_enabled = instruct
    settings.prompt.instruct_template = template.name
    await tk.store.put_settings(settings)
    chat = (await tk.chats.new_chat("Mira")).id
    for name, text in LINES:
        await tk.store.append_message(chat, Message.new(name, text, is_user=name == "Ada"))
    greeting = Message.model_validate((await tk.store.load_chat(chat)).messages[0].data)
    stored = [(greeting.name, greeting.mes), *LINES][:-1]
    entries = "\n\n".join(f"{name}:\n{text}" for name, text in stored)
    server.script(Reply(text="They wait for the tide."))
    update = await summarize(tk.context(chat), force=True)
    assert update is not None and update.text == "They wait for the tide."
    request = server.requests[-1]
    assert request.path == "/v1/completions" and "messages" not in request.body
    return str(request.body["prompt"]), entries


async def test_without_instruct_the_persona_speaks_the_raw_prompt(
    site: tuple[Tavern, HangingServer],
) -> None:
    tk, server = site
    prompt, entries = await _summary_request(tk, server, instruct=False)
    # createRawPrompt: system prompt, then "<persona>: " and the raw prompt, then a newline
    assert prompt == f"Summarize Mira's story.\nAda: {entries}\n"


@pytest.mark.parametrize("t", [CHATML, ALPACA], ids=lambda t: t.name)
async def test_with_instruct_the_sequences_wrap_it(
    site: tuple[Tavern, HangingServer], t: InstructTemplate
) -> None:
    tk, server = site
    prompt, entries = await _summary_request(tk, server, instruct=True, template=t)
    story = t.story_string_prefix + ("\n" if t.story_string_prefix else "")
    story += "Summarize Mira's story." + t.story_string_suffix
    if not t.story_string_suffix:
        story += "\n"  # wrap, and no suffix of its own: the story string ends its line
    message = f"{t.input_sequence}\n{entries}{t.input_suffix or chr(10)}"
    last = f"{t.last_system_sequence or t.output_sequence}\n"  # the quiet last line
    assert prompt == story + message + last
