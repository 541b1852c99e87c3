"""The task registry: task families register their training sets and tasks here.

``TASKS`` maps what ``--task`` names (a benchmark such as ``bfcl`` or a group such as
``bfcl-live``) to a :class:`tasks.base.Task`; ``TRAIN_SETS`` maps training-set names
(``rlla``, ``tools-synth``, ...) to a :class:`tasks.base.TrainSet`.
"""
from __future__ import annotations

from tasks.base import Example, Reward, Task, TrainSet, VerifierInfo
from tasks.registry import TASKS, TRAIN_SETS

# Families register themselves on import; keep this list explicit so a missing family is an
# ImportError, not a silently shorter registry.
from tasks import tools as _tools  # noqa: E402,F401
from tasks import sql as _sql  # noqa: E402,F401
from tasks import instruct as _instruct  # noqa: E402,F401

__all__ = ["TASKS", "TRAIN_SETS", "Example", "Reward", "Task", "TrainSet", "VerifierInfo"]
