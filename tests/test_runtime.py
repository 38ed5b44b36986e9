"""``Runtime``: the shared parts of one Tavern, and its embedded models made once per name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavernkit import Tavern, TavernKitError
from tavernkit.models.profile import ConnectionProfile
from tavernkit.providers.profiles import LOCAL_MODEL_NAME, ModelProfile, resolve_model
from tavernkit.runtime import LocalModels


def test_local_models_are_made_once_per_model_name() -> None:
    made: list[str] = []

    def make(profile: ConnectionProfile, model_profile: ModelProfile) -> object:
        made.append(profile.model)
        return object()

    models = LocalModels(make)  # type: ignore[arg-type]
    model_profile = resolve_model("local", LOCAL_MODEL_NAME)
    default = ConnectionProfile(name="a", api="local", source="local", model="")
    named = ConnectionProfile(name="b", api="local", source="local", model=LOCAL_MODEL_NAME)
    other = ConnectionProfile(name="c", api="local", source="local", model="other-model")
    first = models(default, model_profile)
    # an unnamed model is the embedded one: the same provider as when it is named
    assert models(named, model_profile) is first
    assert models(other, model_profile) is not first
    assert made == ["", "other-model"]


async def test_the_runtime_holds_the_store_only_while_the_tavern_is_open(tmp_path: Path) -> None:
    tk = Tavern(tmp_path / "home", load_plugins=False)
    with pytest.raises(TavernKitError, match="not open"):
        tk.runtime.store  # noqa: B018
    async with tk:
        assert tk.runtime.is_open and tk.runtime.store is tk.store
        assert tk.runtime.owner == tk.owner
        assert tk.runtime.tools is tk.tools and tk.runtime.generations is tk.generations
        assert tk.key_cooldowns is tk.runtime.key_cooldowns
        assert (await tk.runtime.settings()) == (await tk.settings())
    assert not tk.runtime.is_open
