"""JSON Schema checks (draft 2020-12, formats asserted) through ``jsonschema``, imported on
first use: a turn that checks no tool call and no structured reply (every plain chat reply)
never imports jsonschema and its format checkers (~0.1-0.3 s of a cold ``tavernkit chat
--once``). :mod:`.check` does the work; :mod:`tavernkit.tools.validate` and
:mod:`tavernkit.tools.structured` reach it through this face (``json_schema.schema_validator``
read when a check runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face

if TYPE_CHECKING:
    from tavernkit.tools.json_schema.check import schema_issues, schema_validator

__all__ = ["schema_issues", "schema_validator"]

__getattr__, __dir__ = lazy_face(
    __name__, globals(), dict.fromkeys(__all__, "tavernkit.tools.json_schema.check")
)
