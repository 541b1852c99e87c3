"""A quiet console: known noise is switched off where it is made.

- Ray's actors and workers (the Train controller, the placement-group cleaner that cannot reach
  the state API without Ray's dashboard, the preemption watcher, every worker's prints and
  warnings) print into Ray's own log files only: the driver starts Ray with
  ``log_to_driver=False``. Progress reaches the console through ``harness.console.progress``,
  and a worker's failure through the exception ``fit`` raises (plus the log folder, which
  :func:`ray_log_hint` names).
- Routine log lines are dropped by a filter on their own logger (Ray's note that a local
  cluster enabled token authentication; DeepSpeed's "Setting accelerator to CPU"; MLflow's
  creation of a local store); every other line of those loggers still shows.
- In every process, the deprecation warnings that torch, DeepSpeed and transformers raise about
  their own internals (nothing the user can change) are filtered by message, so any other
  warning still shows.
"""
from __future__ import annotations

import logging
import os
import re
import warnings

# (category, message regex, module regex): third-party deprecations raised from inside the
# libraries we call, with the version we verified them on
KNOWN_WARNINGS = (
    # torch 2.13: DeepSpeed's ZeRO-3 collectives call the old names
    (FutureWarning, r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` "
                    r"is deprecated", ""),
    # torch 2.13: transformers / DeepSpeed decorate helpers with torch.jit.script_method
    (DeprecationWarning, r"`torch\.jit\.script_method` is deprecated", ""),
    (DeprecationWarning, r"`torch\.jit\.script` is deprecated", ""),
    # torch 2.13: DeepSpeed's ZeRO-3 reads tensor storage through the typed API
    (UserWarning, r"TypedStorage is deprecated", ""),
    # torch 2.13, non-reentrant checkpointing inside DeepSpeed-wrapped modules
    (FutureWarning, r"`torch\.cpu\.amp\.autocast\(args\.\.\.\)` is deprecated", ""),
    # MLflow 3.17's SQL store (the local --report-to mlflow store) with SQLAlchemy 2.1
    (Warning, r"The ``noload`` loader strategy is deprecated", ""),
)

# (logger, message regex): routine log lines that are not news to a user of this harness
KNOWN_LOG_LINES = (
    # Ray 2.60, driver: a local cluster started with token authentication on by default
    ("ray._private.authentication.authentication_token_setup",
     r"Token authentication is enabled for this Ray cluster"),
    # DeepSpeed 0.19, every process of a CPU run
    ("DeepSpeed", r"Setting accelerator to CPU"),
    # MLflow 3.17, the first run of a results folder: it creates its local SQL store
    ("mlflow.store.db.utils", r"(Creating initial MLflow database tables|Updating database "
                              r"tables)"),
    # vLLM 0.32/0.33's in-place reload, at every weight sync: a tied output head receives no
    # tensor of its own (the engine reprocesses it from the embedding and checks it through
    # its kernel) and the rotary embedding's cos/sin cache is computed, not loaded; any other
    # layer that loads nothing still shows (docs/vllm.md)
    ("vllm.model_executor.model_loader.reload.layerwise",
     r"^(ParallelLMHead|\w*RotaryEmbedding): Failed to load weights$"),
)


class _DropLines(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def filter_known_warnings() -> None:
    for category, message, module in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


def configure_process() -> None:
    """Warning filters and log-line filters for this process (driver or worker); idempotent."""
    filter_known_warnings()
    for name, pattern in KNOWN_LOG_LINES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropLines) and f.pattern.pattern == pattern
                   for f in logger.filters):
            logger.addFilter(_DropLines(pattern))
    # transformers' weight-loading bars repeat on every model load; the run draws its own
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def ray_log_hint() -> str:
    """Where Ray wrote the workers' own output (for error messages)."""
    try:
        import ray

        node = ray._private.worker.global_worker.node
        return os.path.join(node.get_session_dir_path(), "logs")
    except Exception:  # no session (Ray not started): nothing to point at
        return "/tmp/ray/session_latest/logs"
