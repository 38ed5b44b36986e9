"""Names, character-card, persona and state macros."""

from __future__ import annotations

from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.registry import ArgSpec, MacroCall, MacroRegistry, MacroRuntimeError

__all__ = ["register"]


def _group(env: MacroEnv) -> str:
    return env.group if env.group is not None else env.char


def _original(call: MacroCall) -> str:
    env = call.env
    if env.original is None:
        raise MacroRuntimeError("no original text in this context")
    evaluation = call.evaluation
    if evaluation.original_used:
        return ""
    evaluation.original_used = True
    return env.original


def _first_message(call: MacroCall) -> str:
    env = call.env
    index_text = call.arg(0, "0").strip() or "0"
    index = int(index_text)
    if index <= 0:
        return env.first_message
    greetings = list(env.alternate_greetings)
    return greetings[index - 1] if index - 1 < len(greetings) else ""


def _has_extension(call: MacroCall) -> str:
    return "true" if call.args[0] in call.env.extensions else "false"


def register(registry: MacroRegistry) -> None:
    def value(
        name: str,
        getter: object,
        aliases: tuple[str, ...] = (),
        category: str = "",
        description: str = "",
    ) -> None:
        fn = getter  # a function of the environment
        registry.register(
            name,
            lambda c, fn=fn: fn(c.env),  # type: ignore[misc]
            aliases=aliases,
            category=category,
            description=description,
            pure=fn,  # type: ignore[arg-type]
        )

    value("user", lambda e: e.user, category="names", description="The user's (persona) name.")
    value("char", lambda e: e.char, category="names", description="The character's name.")
    value(
        "group",
        _group,
        ("charIfNotGroup",),
        "names",
        "All group members, or the character in a solo chat.",
    )
    value(
        "groupNotMuted",
        lambda e: e.group_not_muted if e.group_not_muted is not None else _group(e),
        category="names",
        description="Unmuted group members.",
    )
    value(
        "notChar",
        lambda e: e.not_char if e.not_char is not None else e.user,
        category="names",
        description="Everyone but the current speaker.",
    )
    value(
        "charPrompt",
        lambda e: e.char_prompt,
        category="character",
        description="The card's main prompt override.",
    )
    value(
        "charInstruction",
        lambda e: e.char_instruction,
        category="character",
        description="The card's post-history instructions.",
    )
    value(
        "charDescription",
        lambda e: e.description,
        ("description",),
        "character",
        "The character's description.",
    )
    value(
        "charPersonality",
        lambda e: e.personality,
        ("personality",),
        "character",
        "The character's personality.",
    )
    value(
        "charScenario",
        lambda e: e.scenario,
        ("scenario",),
        "character",
        "The character's scenario.",
    )
    value(
        "persona",
        lambda e: e.persona,
        category="character",
        description="The persona's description.",
    )
    value(
        "mesExamplesRaw",
        lambda e: e.mes_examples_raw,
        category="character",
        description="The card's example messages as written.",
    )
    value(
        "mesExamples",
        lambda e: e.mes_examples if e.mes_examples is not None else e.mes_examples_raw,
        category="character",
        description="The example messages, formatted for the prompt.",
    )
    value(
        "charDepthPrompt",
        lambda e: e.char_depth_prompt,
        category="character",
        description="The card's depth prompt.",
    )
    value(
        "charCreatorNotes",
        lambda e: e.creator_notes,
        ("creatorNotes",),
        "character",
        "The card's creator notes.",
    )
    value(
        "charVersion",
        lambda e: e.char_version,
        ("version", "char_version"),
        "character",
        "The card's version.",
    )
    registry.register(
        "charFirstMessage",
        _first_message,
        aliases=["greeting"],
        args=[ArgSpec("index", optional=True, type="integer", default="0")],
        category="character",
        description="The first message (0) or alternate greeting i.",
    )
    registry.register(
        "original",
        _original,
        category="character",
        description="The text being overridden (only the first use prints it).",
    )
    value("model", lambda e: e.model, category="state", description="The model in use.")
    value(
        "lastGenerationType",
        lambda e: e.last_generation_type,
        category="state",
        description="The type of the last generation (normal, swipe, ...).",
    )
    value(
        "isMobile",
        lambda e: "true" if e.is_mobile else "false",
        category="state",
        description="Whether the client is a mobile device.",
    )
    registry.register(
        "hasExtension",
        _has_extension,
        args=["name"],
        category="state",
        description="Whether an extension is enabled.",
    )
