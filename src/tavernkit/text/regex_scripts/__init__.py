"""SillyTavern's Regex extension: scripts that rewrite text where SillyTavern says.

- :mod:`.engine`: ``getRegexedString`` (:func:`run_scripts`) and ``runRegexScript``
  (:func:`run_script`), placements, only-flags, depths, macros in the find pattern, trim
  strings and the replacement's ``{{match}}``/``$1``/``$<name>``;
- :mod:`.js_regex`: ``regexFromString`` and JavaScript's ``replace`` over ``regress`` (UTF-16
  code units where JavaScript uses them);
- :mod:`.guard`: the time bound on matching (risky patterns and long texts run in a worker
  process with a timeout; a stopped pattern is a no-op);
- :mod:`.scopes`: the global, preset and character lists, their allow lists, and the hooks the
  ``/regex``, ``/regex-state`` and ``/regex-toggle`` commands call.

The models (:class:`~tavernkit.models.regex_script.RegexScript`, import/export) are in
``models/regex_script.py``; where a turn applies the scripts is ``prompt/regex.py`` (prompts,
world info, reasoning) and ``chat/regex_text.py`` (what is stored and displayed).
"""

from tavernkit.text.regex_scripts.engine import (
    RegexMacros,
    RegexPlacement,
    RegexScriptError,
    ScriptView,
    plain_macros,
    run_script,
    run_scripts,
    sanitize_regex_macro,
    script_view,
)
from tavernkit.text.regex_scripts.guard import DEFAULT_GUARD, ScriptRegexGuard
from tavernkit.text.regex_scripts.js_regex import JsRegex, regex_from_string
from tavernkit.text.regex_scripts.scopes import (
    ActiveScripts,
    CommandResult,
    Notice,
    ScriptLists,
    ScriptScope,
    regex_command,
    regex_state,
    regex_toggle,
    replace_script,
)

__all__ = [
    "DEFAULT_GUARD",
    "ActiveScripts",
    "CommandResult",
    "JsRegex",
    "Notice",
    "RegexMacros",
    "RegexPlacement",
    "RegexScriptError",
    "ScriptLists",
    "ScriptRegexGuard",
    "ScriptScope",
    "ScriptView",
    "plain_macros",
    "regex_command",
    "regex_from_string",
    "regex_state",
    "regex_toggle",
    "replace_script",
    "run_script",
    "run_scripts",
    "sanitize_regex_macro",
    "script_view",
]
