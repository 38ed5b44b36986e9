"""An OpenAPI fuzz run (schemathesis) over a real uvicorn: every operation, valid and invalid
inputs, and no answer is a 5xx. Bounded and deterministic: a fixed number of examples per
operation, derandomized, no example database."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tavernkit.server.app import create_app
from tavernkit.server.routes.documents import DOCUMENT_PATHS

from ._cards import card_file
from ._live import threaded_server
from .conftest import settings as server_settings

#: examples per operation and mode: ~54 operations x 2 modes x 3 = about 320 requests
EXAMPLES = 3
#: the document kinds share one set of handlers (routes/documents.py): two of them stand for
#: the rest (a lorebook's model, and one with a required field besides the name)
_SAME_HANDLERS = tuple(f"/{p}" for p in DOCUMENT_PATHS if p not in ("lorebooks", "endpoints"))


def _fuzzed(path: str) -> bool:
    return not any(path == p or path.startswith(p + "/") for p in _SAME_HANDLERS)


def test_no_input_gets_a_5xx(tmp_path: Path) -> None:
    conf = server_settings(tmp_path / "home", upload_max_bytes=256 * 1024)
    schema = schemathesis.openapi.from_dict(create_app(conf).openapi())
    operations = [r.ok() for r in schema.get_all_operations() if _fuzzed(r.ok().path)]
    assert len(operations) > 45
    failures: list[str] = []
    ran = 0
    with threaded_server(conf) as url, requests.Session() as session:
        # something to find: a character, a chat with messages
        r = session.post(f"{url}/import", files={"file": card_file("Mira")})
        assert r.status_code == 201, r.text
        chat = session.post(f"{url}/chats", json={"character": "Mira"}).json()["id"]
        session.post(f"{url}/chats/{chat}/messages", json={"name": "u", "text": "hi"})
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=EXAMPLES,
                    derandomize=True,
                    database=None,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                )
                def run(case: schemathesis.Case) -> None:
                    response = case.call(base_url=url, session=session, timeout=10)
                    if response.status_code >= 500:
                        failures.append(
                            f"{case.method} {case.formatted_path} -> {response.status_code}"
                        )
                    elif response.status_code >= 400:
                        body = response.json()
                        assert set(body) == {"error"}, body
                        assert {"type", "message"} <= set(body["error"]), body

                try:
                    run()
                except Unsatisfiable:
                    # an operation with nothing to get wrong (no parameters, no body)
                    assert mode is GenerationMode.NEGATIVE, operation.label
                    continue
                ran += 1
    assert failures == []
    assert ran > 60


@pytest.mark.parametrize("path", ["/characters/%00", "/chats/x/messages/-1", "/export/nope/x"])
def test_odd_paths_are_4xx(tmp_path: Path, path: str) -> None:
    with threaded_server(server_settings(tmp_path / "home")) as url:
        r = requests.get(url + path, timeout=10)
    assert 400 <= r.status_code < 500
    assert "error" in r.json()
