"""``import tavernkit`` is light: the public names are imported on first use."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import subprocess
import sys

import pytest

import tavernkit
from tavernkit import errors
from tavernkit.errors import NotFound, RequestAborted, TavernKitError


def test_import_tavernkit_loads_neither_the_engines_nor_the_models() -> None:
    code = (
        "import sys, tavernkit\n"
        "heavy = [m for m in ('tavernkit.facade', 'tavernkit.context', 'tavernkit.models', "
        "'tavernkit.generation', 'tavernkit.prompt', 'pydantic', 'httpx2') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_every_public_name_resolves_to_its_defining_module() -> None:
    from tavernkit.facade import Tavern
    from tavernkit.tools.calls import ToolCall

    assert tavernkit.Tavern is Tavern
    assert tavernkit.ToolCall is ToolCall
    for name in tavernkit.__all__:
        assert getattr(tavernkit, name) is not None
    assert set(tavernkit.__all__) <= set(dir(tavernkit))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        tavernkit.NoSuchThing  # noqa: B018


#: what an integrator needs, besides the exceptions (issue 14)
INTEGRATOR_NAMES = {
    "AbortController",
    "AbortSignal",
    "ChatService",
    "FunctionTool",
    "ResponseSink",
    "TaskResult",
    "Tavern",
    "TavernContext",
    "TurnOutcome",
}

#: exceptions the library uses for its own control flow, never raised to a caller
INTERNAL_ERRORS = {
    "DiceError",
    "ExprError",
    "MacroRuntimeError",
    "NotStreamable",
    "ReviewUnavailable",
    "StreamTimeout",
    "Unusable",
    "UrlRefused",
}


def _package_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined anywhere in tavernkit (each module imported)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(tavernkit.__path__, "tavernkit."):
        for value in vars(importlib.import_module(info.name)).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("tavernkit")
            ):
                found[value.__qualname__] = value
    return found


def test_the_face_lists_what_an_integrator_needs() -> None:
    assert set(tavernkit.__all__) >= INTEGRATOR_NAMES


def test_every_exception_of_the_package_lives_in_errors() -> None:
    exceptions = _package_exceptions()
    assert len(exceptions) > 40
    for name, cls in exceptions.items():
        assert getattr(errors, name) is cls, name


def test_every_public_exception_is_on_the_face() -> None:
    public = {
        name
        for name, cls in _package_exceptions().items()
        if issubclass(cls, TavernKitError | RequestAborted)
    }
    assert public == set(tavernkit.__all__) & set(_package_exceptions())
    assert set(_package_exceptions()) - public == INTERNAL_ERRORS


def test_old_import_paths_still_give_the_same_exceptions() -> None:
    from tavernkit.cli.slash import UsageError
    from tavernkit.embed.errors import EmbedderUnavailable
    from tavernkit.generation.abort import AbortError
    from tavernkit.generation.result import TurnFailure
    from tavernkit.models.chat_window import OutsideWindow
    from tavernkit.prompt.state import TokenBudgetExceeded
    from tavernkit.providers.http import Aborted
    from tavernkit.providers.local_model import PullError
    from tavernkit.tools.errors import ToolArgumentsError

    for cls in (
        UsageError,
        EmbedderUnavailable,
        AbortError,
        TurnFailure,
        OutsideWindow,
        TokenBudgetExceeded,
        Aborted,
        PullError,
        ToolArgumentsError,
    ):
        assert getattr(tavernkit, cls.__name__) is cls
        assert getattr(errors, cls.__name__) is cls


def test_public_names_read_tavernkit_as_their_module() -> None:
    for name in tavernkit.__all__:
        assert getattr(tavernkit, name).__module__ == "tavernkit", name


def test_the_exceptions_read_tavernkit_from_import_on() -> None:
    code = (
        "import tavernkit.errors as e\n"
        "print(e.NotFound.__module__, e.ToolCallParseError.__module__, e.StreamTimeout.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # the internal ones keep their home: they are not importable from the face
    assert done.stdout.split() == ["tavernkit", "tavernkit", "tavernkit.errors"]


def test_a_lazy_name_reads_tavernkit_once_resolved() -> None:
    code = (
        "from tavernkit.chat.reply import TurnOutcome\n"
        "before = TurnOutcome.__module__\n"
        "import tavernkit\n"
        "tavernkit.TurnOutcome\n"
        "print(before, TurnOutcome.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["tavernkit.chat.reply", "tavernkit"]


def test_a_rewritten_exception_still_pickles() -> None:
    # pickle finds a class by module and name: tavernkit.NotFound must resolve
    error = pickle.loads(pickle.dumps(NotFound("no character 'Mira'")))
    assert type(error) is NotFound
    assert str(error) == "no character 'Mira'"


def test_the_generation_face_resolves_each_name_to_its_module() -> None:
    import tavernkit.generation as generation
    from tavernkit.generation.keys import KeyPool
    from tavernkit.generation.turn import run_turn

    assert generation.run_turn is run_turn
    assert generation.KeyPool is KeyPool
    for name in generation.__all__:
        assert getattr(generation, name) is not None, name
    assert set(generation.__all__) <= set(dir(generation))
    with pytest.raises(AttributeError, match="no_such_stage"):
        generation.no_such_stage  # noqa: B018


def test_a_light_generation_module_does_not_load_the_runner() -> None:
    code = (
        "import sys, tavernkit.generation.abort\nprint('tavernkit.generation.turn' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("face", "module", "named_as"),
    [
        # which output a lorebook entry's position selects, and where it goes in the prompt
        ("tavernkit.worldinfo", "tavernkit.worldinfo.assemble", ":mod:`.assemble`"),
        ("tavernkit.prompt", "tavernkit.prompt.extensions", ":mod:`.extensions`"),
        # where Retry-After becomes a key's cooldown
        ("tavernkit.generation", "tavernkit.generation.keys", ":mod:`.keys`"),
        # where a swipe is persisted while streaming
        ("tavernkit.chat", "tavernkit.chat.sink", ":mod:`.sink`"),
        ("tavernkit.context", "tavernkit.context.request_primitives", ":mod:`.request_primitives`"),
    ],
)
def test_where_things_are_is_one_hop_from_a_face(face: str, module: str, named_as: str) -> None:
    doc = importlib.import_module(face).__doc__ or ""
    assert named_as in doc
    importlib.import_module(module)


def test_retry_after_becomes_a_cooldown_where_the_generation_face_says() -> None:
    from tavernkit.generation import CooldownPolicy

    policy = CooldownPolicy()
    # a Retry-After longer than the class's own rest wins
    assert policy.cooldown("rate_limit", 1, 600.0) >= 600.0
