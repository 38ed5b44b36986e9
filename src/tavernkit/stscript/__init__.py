"""STscript: SillyTavern 1.18's slash-command language, and its Quick Reply sets.

Entry points::

    from tavernkit.stscript import ScriptHost, run_script
    host = ScriptHost(user_name="Ann", char_name="Bo")
    result = await run_script("/setvar key=x 1 | /addvar key=x 2 | /getvar x", host)
    result.pipe  # "3"

- :mod:`.parser`: the grammar (pipes, closures, named/unnamed arguments, quoting, escaping,
  comments, parser flags), with SillyTavern's error messages and positions;
- :mod:`.executor`: pipes, argument substitution (the project's macro engine plus
  ``{{pipe}}``, ``{{var::}}``, ``{{arg::}}``, ``{{timesIndex}}``), closures and their scopes,
  ``/break`` and ``/abort``, and the step/time/depth budgets;
- :mod:`.registry`: commands as small registered functions; :mod:`.commands` the built-ins
  (variables, math, text, chat, generation, quick replies, regex, questions to the user);
- :mod:`.host`: what a script drives (chat, input box, toasts, generation, quick replies,
  regex), in memory; :mod:`tavernkit.chat.script_host` binds it to a stored chat;
- :mod:`.quick_replies`: Quick Reply sets and their global/chat/character bindings.

The names are imported on first use (module ``__getattr__``): reading Quick Reply sets or a
command registry does not import the parser, the executor and the built-in commands (a Tavern
whose plugins add no command imports none of them until a script runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face

if TYPE_CHECKING:
    from tavernkit.stscript.executor import Budget, CommandCall, ScriptRunner
    from tavernkit.stscript.host import (
        Answer,
        Asker,
        CharacterRef,
        GenerationRequest,
        NoRegex,
        Question,
        RegexBridge,
        RegexCommand,
        RegexPlacement,
        RegexReply,
        ScriptHost,
        Toast,
    )
    from tavernkit.stscript.parser import parse_script
    from tavernkit.stscript.quick_replies import (
        QuickReplyLibrary,
        SetLink,
        click_text,
        menu_reply,
    )
    from tavernkit.stscript.registry import Command, CommandRegistry, NamedArgSpec
    from tavernkit.stscript.run import default_registry, run_script
    from tavernkit.stscript.scope import ClosureResult, Scope, ScriptClosure

__all__ = [
    "Answer",
    "Asker",
    "Budget",
    "CharacterRef",
    "ClosureResult",
    "Command",
    "CommandCall",
    "CommandRegistry",
    "GenerationRequest",
    "NamedArgSpec",
    "NoRegex",
    "Question",
    "QuickReplyLibrary",
    "RegexBridge",
    "RegexCommand",
    "RegexPlacement",
    "RegexReply",
    "Scope",
    "ScriptClosure",
    "ScriptHost",
    "ScriptRunner",
    "SetLink",
    "Toast",
    "click_text",
    "default_registry",
    "menu_reply",
    "parse_script",
    "run_script",
]

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "Answer": "tavernkit.stscript.host",
    "Asker": "tavernkit.stscript.host",
    "Budget": "tavernkit.stscript.executor",
    "CharacterRef": "tavernkit.stscript.host",
    "ClosureResult": "tavernkit.stscript.scope",
    "Command": "tavernkit.stscript.registry",
    "CommandCall": "tavernkit.stscript.executor",
    "CommandRegistry": "tavernkit.stscript.registry",
    "GenerationRequest": "tavernkit.stscript.host",
    "NamedArgSpec": "tavernkit.stscript.registry",
    "NoRegex": "tavernkit.stscript.host",
    "Question": "tavernkit.stscript.host",
    "QuickReplyLibrary": "tavernkit.stscript.quick_replies",
    "RegexBridge": "tavernkit.stscript.host",
    "RegexCommand": "tavernkit.stscript.host",
    "RegexPlacement": "tavernkit.stscript.host",
    "RegexReply": "tavernkit.stscript.host",
    "Scope": "tavernkit.stscript.scope",
    "ScriptClosure": "tavernkit.stscript.scope",
    "ScriptHost": "tavernkit.stscript.host",
    "ScriptRunner": "tavernkit.stscript.executor",
    "SetLink": "tavernkit.stscript.quick_replies",
    "Toast": "tavernkit.stscript.host",
    "click_text": "tavernkit.stscript.quick_replies",
    "default_registry": "tavernkit.stscript.run",
    "menu_reply": "tavernkit.stscript.quick_replies",
    "parse_script": "tavernkit.stscript.parser",
    "run_script": "tavernkit.stscript.run",
}

__getattr__, __dir__ = lazy_face("tavernkit.stscript", globals(), _LAZY)
