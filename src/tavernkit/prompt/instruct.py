"""Instruct-mode formatting (SillyTavern's ``instruct-mode.js``): messages, examples, the
last prompt line, the story-string wrapper and the stop sequences.

Sequences are macro-substituted when the template's ``macro`` is on, then ``{{name}}`` becomes
the speaker (``System`` for system sequences). ``wrap`` joins prefix and text with newlines and
gives an empty suffix a newline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tavernkit.models.templates import InstructTemplate
from tavernkit.prompt.examples import parse_example_block
from tavernkit.prompt.state import Substitute

__all__ = [
    "FIRST",
    "LAST",
    "InstructNames",
    "format_instruct_chat",
    "format_instruct_examples",
    "format_instruct_prompt",
    "format_instruct_story_string",
    "instruct_stop_sequences",
]

#: ``force_output_sequence``: use the first / last variant of the sequence.
FIRST = 1
LAST = 2

_NAME = re.compile(r"\{\{name\}\}", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class InstructNames:
    user: str
    char: str
    in_group: bool = False
    #: every group member's name, list order (example speakers; stop strings)
    members: tuple[str, ...] = ()


def _apply(text: str, instruct: InstructTemplate, sub: Substitute, name: str) -> str:
    if not instruct.macro:
        return text
    return _NAME.sub(lambda _m: name, sub(text))


def format_instruct_chat(
    instruct: InstructTemplate,
    sub: Substitute,
    names: InstructNames,
    *,
    name: str,
    text: str,
    is_user: bool,
    is_narrator: bool,
    force_avatar: bool = False,
    force_sequence: int | None = None,
) -> str:
    """``formatInstructModeChat``: one message with its sequences."""
    include_names = False if is_narrator else instruct.names_behavior == "always"
    if (
        not is_narrator
        and instruct.names_behavior == "force"
        and ((names.in_group and name != names.user) or (force_avatar and name != names.user))
    ):
        include_names = True

    if is_narrator:
        prefix = (
            instruct.input_sequence if instruct.system_same_as_user else instruct.system_sequence
        )
        suffix = instruct.input_suffix if instruct.system_same_as_user else instruct.system_suffix
    elif is_user:
        if force_sequence == FIRST:
            prefix = instruct.first_input_sequence or instruct.input_sequence
        elif force_sequence == LAST:
            prefix = instruct.last_input_sequence or instruct.input_sequence
        else:
            prefix = instruct.input_sequence
        suffix = instruct.input_suffix
    else:
        if force_sequence == FIRST:
            prefix = instruct.first_output_sequence or instruct.output_sequence
        elif force_sequence == LAST:
            prefix = instruct.last_output_sequence or instruct.output_sequence
        else:
            prefix = instruct.output_sequence
        suffix = instruct.output_suffix
    prefix = _apply(prefix or "", instruct, sub, name or "System")
    suffix = _apply(suffix or "", instruct, sub, name or "System")
    if not suffix and instruct.wrap:
        suffix = "\n"
    separator = "\n" if instruct.wrap else ""
    body = (f"{name}: {text}" if include_names and name else text) + suffix
    return separator.join(x for x in (prefix, body) if x)


def format_instruct_prompt(
    instruct: InstructTemplate,
    sub: Substitute,
    names: InstructNames,
    *,
    name: str,
    is_impersonate: bool = False,
    prompt_bias: str = "",
    is_quiet: bool = False,
    quiet_to_loud: bool = False,
) -> str:
    """``formatInstructModePrompt``: the sequence that opens the reply to generate."""
    include_names = (
        bool(name)
        and (
            instruct.names_behavior == "always"
            or (names.in_group and instruct.names_behavior == "force")
        )
        and not (is_quiet and not quiet_to_loud)
    )
    if is_impersonate:
        sequence = instruct.last_input_sequence or instruct.input_sequence
    elif is_quiet and not quiet_to_loud:
        sequence = instruct.last_system_sequence or instruct.output_sequence
    else:
        sequence = instruct.last_output_sequence or instruct.output_sequence
    sequence = sequence or ""
    name_filler = ""
    if (
        include_names
        and instruct.last_output_sequence
        and instruct.output_sequence
        and re.search(r"\s$", instruct.output_sequence)
        and not re.search(r"\s$", instruct.last_output_sequence)
    ):
        name_filler = instruct.output_sequence[-1]
    if instruct.macro:
        sequence = _NAME.sub(lambda _m: name or "System", sub(sequence))
    separator = "\n" if instruct.wrap else ""
    if include_names:
        text = separator + sequence + separator + name_filler + f"{name}:"
    else:
        text = separator + sequence
    if is_quiet and separator:
        text = text[len(separator) :]
    if not is_impersonate and prompt_bias:
        text += prompt_bias if include_names else separator + prompt_bias.lstrip()
    return (text.rstrip() if instruct.wrap else text) + ("" if include_names else separator)


def format_instruct_examples(
    instruct: InstructTemplate,
    sub: Substitute,
    names: InstructNames,
    blocks: Sequence[str],
    *,
    example_separator: str,
) -> list[str]:
    """``formatInstructModeExamples``: the example blocks as instruct-formatted messages."""
    heading = f"{sub(example_separator)}\n" if example_separator else ""
    start = re.compile(r"<START>\n", re.IGNORECASE)
    if instruct.skip_examples:
        return [start.sub(lambda _m: heading, b, count=1) for b in blocks]
    include_names = instruct.names_behavior == "always"
    force = instruct.names_behavior == "force"
    # In a group with names on, each example message keeps its speaker's ``Name: `` from the
    # parse (another member's line stays that member's), so no name is added again.
    group_names = names.in_group and (include_names or force)

    def seq(text: str, name: str) -> str:
        if not instruct.macro:
            return text
        return _NAME.sub(lambda _m: name, sub(text))

    input_prefix = seq(instruct.input_sequence or "", names.user)
    output_prefix = seq(instruct.output_sequence or "", names.char)
    input_suffix = seq(instruct.input_suffix or "", names.user)
    output_suffix = seq(instruct.output_suffix or "", names.char)
    if instruct.macro:
        if not input_suffix and instruct.wrap:
            input_suffix = "\n"
        if not output_suffix and instruct.wrap:
            output_suffix = "\n"
    separator = "\n" if instruct.wrap else ""
    out: list[str] = []
    for block in blocks:
        messages = parse_example_block(
            block.replace("\r", ""),
            user=names.user,
            char=names.char,
            group_members=names.members,
            in_group=group_names,
        )
        if not messages:
            continue
        if heading:
            out.append(heading)
        for example in messages:
            is_user = example.name == "example_user"
            this_name = names.user if is_user else names.char
            named = not group_names and (include_names or (force and (names.in_group or is_user)))
            content = f"{this_name}: {example.content}" if named else example.content
            prefix = input_prefix if is_user else output_prefix
            suffix = input_suffix if is_user else output_suffix
            out.append(separator.join(x for x in (prefix, content + suffix) if x))
    if not out:
        return [start.sub(lambda _m: heading, b, count=1) for b in blocks]
    return out


def format_instruct_story_string(story: str, instruct: InstructTemplate, sub: Substitute) -> str:
    """``formatInstructModeStoryString``: the story string inside the template's story-string
    prefix and suffix."""
    prefix = (
        sub(instruct.story_string_prefix or "")
        if instruct.macro
        else (instruct.story_string_prefix or "")
    )
    prefix = _NAME.sub(lambda _m: "System", prefix)
    suffix = (
        sub(instruct.story_string_suffix or "")
        if instruct.macro
        else (instruct.story_string_suffix or "")
    )
    separator = "\n" if instruct.wrap else ""
    return separator.join(x for x in (prefix, story + suffix) if x)


def instruct_stop_sequences(
    instruct: InstructTemplate, sub: Substitute, names: InstructNames
) -> list[str]:
    """``getInstructStoppingSequences`` (instruct part): every sequence line, once, with a
    leading newline when ``wrap``; whitespace-only ones are skipped."""
    if instruct.sequences_as_stop_strings:
        sequences = [
            instruct.stop_sequence,
            _NAME.sub(lambda _m: names.user, instruct.input_sequence or ""),
            _NAME.sub(lambda _m: names.char, instruct.output_sequence or ""),
            _NAME.sub(lambda _m: names.char, instruct.first_output_sequence or ""),
            _NAME.sub(lambda _m: names.char, instruct.last_output_sequence or ""),
            _NAME.sub(lambda _m: "System", instruct.system_sequence or ""),
            _NAME.sub(lambda _m: "System", instruct.last_system_sequence or ""),
        ]
    else:
        sequences = [instruct.stop_sequence]
    lines: list[str] = []
    for line in "\n".join(s or "" for s in sequences).split("\n"):
        if line not in lines:
            lines.append(line)
    out = []
    for line in lines:
        if not line or not line.strip():
            continue
        wrapped = "\n" + line if instruct.wrap else line
        out.append(sub(wrapped) if instruct.macro else wrapped)
    return out
