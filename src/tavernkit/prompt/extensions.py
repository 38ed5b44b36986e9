"""Extension prompts: the Author's Note, depth prompts and world info placed by key.

SillyTavern keeps these in one map keyed by name and reads them with ``getExtensionPrompt``:
keys sorted, filtered by position, depth and role, each value trimmed, joined, then
macro-substituted. The key names matter because the sort decides the order of texts that share
a depth and role (``2_floating_prompt`` < ``DEPTH_PROMPT`` < ``PERSONA_DESCRIPTION`` <
``customDepthWI_...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tavernkit.jscompat import js_string, js_trim
from tavernkit.models.chat import Message
from tavernkit.models.persona import PersonaPosition
from tavernkit.prompt.card import CardFields
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute
from tavernkit.worldinfo.result import WorldInfoResult, merge_authors_note

__all__ = [
    "ANY",
    "AUTHORS_NOTE_KEY",
    "DEPTH_PROMPT_KEY",
    "NEVER",
    "PERSONA_KEY",
    "ROLE_NAMES",
    "build_extension_prompts",
    "extension_prompt_text",
    "role_number",
    "script_injections",
    "worldinfo_outlets",
]

AUTHORS_NOTE_KEY = "2_floating_prompt"
DEPTH_PROMPT_KEY = "DEPTH_PROMPT"
PERSONA_KEY = "PERSONA_DESCRIPTION"

#: ``depth``/``role`` of an extension prompt that matches every query (JavaScript ``undefined``).
ANY = None
#: ``depth`` that matches no query (JavaScript ``null`` is never ``===`` a number).
NEVER = -(10**9)

ROLE_NAMES = ("system", "user", "assistant")


def role_number(role: str | int | None) -> int:
    """``getExtensionPromptRoleByName``: system 0, user 1, assistant 2 (default system)."""
    if isinstance(role, int) and not isinstance(role, bool):
        return role
    if isinstance(role, str) and role in ROLE_NAMES:
        return ROLE_NAMES.index(role)
    return 0


#: SillyTavern's key prefix of STscript ``/inject`` prompts (``SCRIPT_PROMPT_KEY``)
SCRIPT_INJECT_KEY = "script_inject_"


def script_injections(metadata: object) -> dict[str, ExtensionPrompt]:
    """The chat's ``/inject`` prompts (``chat_metadata.script_injects``) as extension prompts,
    as SillyTavern sets them again when a chat loads (a ``filter`` closure is not kept)."""
    injects = getattr(metadata, "script_injects", None)
    if injects is None and isinstance(metadata, Mapping):
        injects = metadata.get("script_injects")
    out: dict[str, ExtensionPrompt] = {}
    if not isinstance(injects, Mapping):
        return out
    for ident, inject in injects.items():
        if not isinstance(inject, Mapping) or not inject.get("value"):
            continue
        position = inject.get("position", ExtensionPosition.IN_PROMPT)
        depth = inject.get("depth", 4)
        out[f"{SCRIPT_INJECT_KEY}{ident}"] = ExtensionPrompt(
            js_string(inject["value"]),
            position if isinstance(position, int) else ExtensionPosition.IN_PROMPT,
            int(depth) if isinstance(depth, int | float) and not isinstance(depth, bool) else 4,
            role_number(inject.get("role", 0)),
            bool(inject.get("scan")),
        )
    return out


def worldinfo_outlets(wi: WorldInfoResult | None) -> dict[str, str]:
    """``{{outlet::name}}`` values: each outlet's entries joined with newlines."""
    if wi is None:
        return {}
    return {name: "\n".join(entries) for name, entries in wi.outlets.items()}


def build_extension_prompts(
    state: PromptState,
    wi: WorldInfoResult | None,
    fields: CardFields,
    *,
    messages: Sequence[Message] | None = None,
) -> dict[str, ExtensionPrompt]:
    """The extension prompts of one turn, as Generate sets them before building the prompt."""
    out: dict[str, ExtensionPrompt] = {}
    chat = state.messages if messages is None else messages

    note = state.note
    fires = note.fires(chat)
    an_text = note.prompt if fires else ""
    persona = state.persona_description
    position = state.persona_position
    if fires and persona and position == PersonaPosition.TOP_AN:
        an_text = f"{persona}\n{an_text}"
    elif fires and persona and position == PersonaPosition.BOTTOM_AN:
        an_text = f"{an_text}\n{persona}"
    if fires and wi is not None:
        an_text = merge_authors_note(wi.an_top, an_text, wi.an_bottom)
    out[AUTHORS_NOTE_KEY] = ExtensionPrompt(an_text, note.position, note.depth, note.role)

    if fields.group_depth_prompts is not None:
        # Join mode: one prompt per member that has one, numbered over those members only.
        for i, joined in enumerate(fields.group_depth_prompts):
            out[f"{DEPTH_PROMPT_KEY}_{i}"] = ExtensionPrompt(
                joined.text, ExtensionPosition.IN_CHAT, joined.depth, role_number(joined.role)
            )
    else:
        depth_prompt = state.character.depth_prompt
        out[DEPTH_PROMPT_KEY] = ExtensionPrompt(
            fields.depth_prompt,
            ExtensionPosition.IN_CHAT,
            depth_prompt.depth if depth_prompt else 4,
            role_number(depth_prompt.role if depth_prompt else "system"),
        )

    if persona and position == PersonaPosition.AT_DEPTH:
        depth = state.persona.depth if state.persona else state.settings.persona_description_depth
        role = state.persona.role if state.persona else state.settings.persona_description_role
        out[PERSONA_KEY] = ExtensionPrompt(persona, ExtensionPosition.IN_CHAT, depth, role)

    if wi is not None:
        for group in wi.depth:
            depth_value: int | None
            if not group.has_depth:
                depth_value, depth_key = ANY, "undefined"
            elif group.depth is None or isinstance(group.depth, bool):
                depth_value, depth_key = NEVER, js_string(group.depth)
            else:
                depth_value, depth_key = int(group.depth), js_string(group.depth)
            role_value = group.role if isinstance(group.role, int) else role_number(group.role)
            key = f"customDepthWI_{depth_key}_{js_string(group.role)}"
            out[key] = ExtensionPrompt(
                "\n".join(group.entries), ExtensionPosition.IN_CHAT, depth_value, role_value
            )
        for name, text in worldinfo_outlets(wi).items():
            out[f"customWIOutlet_{name}"] = ExtensionPrompt(text, ExtensionPosition.NONE, 0, 0)

    out.update(state.extension_prompts)
    return out


def extension_prompt_text(
    prompts: Mapping[str, ExtensionPrompt],
    substitute: Substitute,
    *,
    position: int = ExtensionPosition.IN_PROMPT,
    depth: int | None = None,
    separator: str = "\n",
    role: int | None = None,
    wrap: bool = True,
) -> str:
    """``getExtensionPrompt``: the matching values (by sorted key), trimmed and joined."""
    parts: list[str] = []
    for key in sorted(prompts):
        prompt = prompts[key]
        if prompt.position != position or not prompt.value:
            continue
        if depth is not None and prompt.depth is not ANY and prompt.depth != depth:
            continue
        if role is not None and prompt.role is not ANY and prompt.role != role:
            continue
        parts.append(js_trim(prompt.value))
    text = separator.join(parts)
    if wrap and text:
        text = separator + text + separator
    return substitute(text) if text else text
