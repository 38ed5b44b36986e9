"""``generate_task``: one call for every LLM request, one normalized result whatever the backend.

The pipeline (:mod:`tavernkit.tasks.run`; options and result in :mod:`.options`, the task
prompt's pieces — envelope, world info, text folding — in :mod:`.prompt`), in this order:

1. **validation** before anything else (``tools`` with ``json_schema``, ``custom`` world info
   without messages, an unknown source or mode: ``invalid_input``);
2. **profile** (where: connection, model, keys) and **preset** (how: samplers, prompt order)
   resolved separately and combined;
3. **world info**: ``none`` / ``task`` / ``chat`` / ``custom``, always a dry run (sticky and
   cooldown never advance), or a reusable ``runtime_world_info`` snapshot;
4. **macros** in the task messages with side effects stripped (not at all when
   ``substitute_macros=False``; the envelope is evaluated either way);
5. **envelope**: the preset's prompt around the task messages (card optional);
6. **tools / schema**: native tools, or the ``prompt_xml`` / ``prompt_json`` protocol (history
   rewrite, instructions, streaming detector, bounded corrective retries); native structured
   output where the profile has it, else a schema instruction;
7. **dispatch** through the turn runner (``generation.turn.run_turn``) with a one-attempt plan
   plus the provider's retry policy (:mod:`tavernkit.generation.one_request`): the chat
   family
   gets messages, the text family the folded prompt; continuation is off for tool and JSON
   tasks;
8. **normalization** to :class:`TaskResult`; failures are :class:`GenerateTaskError` by code.

A task persists nothing and runs with ``request_scope="extension_internal"``: the main chat's
hooks do not see it.
"""

from __future__ import annotations

from tavernkit.tasks.options import (
    TaskDone,
    TaskEvent,
    TaskOptions,
    TaskReasoningDelta,
    TaskResult,
    TaskStream,
    TaskTextDelta,
    TaskToolCallEvent,
    WorldInfoSource,
)
from tavernkit.tasks.run import (
    TaskServices,
    generate_task,
    generate_task_stream,
    world_info_from_mapping,
)

__all__ = [
    "TaskDone",
    "TaskEvent",
    "TaskOptions",
    "TaskReasoningDelta",
    "TaskResult",
    "TaskServices",
    "TaskStream",
    "TaskTextDelta",
    "TaskToolCallEvent",
    "WorldInfoSource",
    "generate_task",
    "generate_task_stream",
    "world_info_from_mapping",
]
