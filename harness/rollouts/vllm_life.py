"""The vLLM engine's life cycle: when it wakes and sleeps (``VLLMRollout``'s base).

The life-cycle rule, written once here and in no caller: the engine is awake whenever it
generates (training rollouts and evaluation alike) and asleep otherwise, whatever the step did.
Every generation begins by making the engine ready (``_ready``): woken if asleep, and, after a
level-2 sleep (weights discarded), the checkpoint reloaded and the policy's weights loaded
again from the policy it last synced; every generation ends by putting it to sleep. A step that
skips its update (no reward signal) skips the sync, and the next generation still finds the
engine ready. After a sync the engine stays awake for the generation that follows (sleeping in
between would throw a level-2 sync away).
"""
from __future__ import annotations

import contextlib


class Lifecycle:
    """Waking and sleeping for ``VLLMRollout`` (which holds ``llm``, ``capabilities``,
    ``awake``, ``weights_current``, ``sleep_level``, ``policy`` and the rest)."""

    # --- awake exactly while generating ------------------------------------------------------
    @contextlib.contextmanager
    def generating(self):
        """The engine ready for the generation inside (``_ready``) and, where the build can
        sleep, asleep after it: the one place that decides when the engine wakes and sleeps.
        Nested generations (evaluation's chunks) wake and sleep it once."""
        if self.generating_depth == 0:
            self._ready()
        self.generating_depth += 1
        try:
            yield
        finally:
            self.generating_depth -= 1
        if self.generating_depth == 0 and "sleep" in self.capabilities:
            if self.device == "cuda":
                from harness.engine import gpu_used_gb

                self.awake_used_gb = gpu_used_gb()
            self.sleep()

    def _ready(self) -> None:
        """Awake, with the policy's weights: woken if asleep; after a level-2 sleep (weights
        discarded) the checkpoint reloaded and the weights of the policy last synced loaded
        over it (a step without an update synced nothing, and the policy is unchanged since)."""
        if not self.weights_current:
            if self.policy is None:
                raise RuntimeError("internal: the vLLM engine's weights were discarded before "
                                   "any sync: nothing to load them from")
            self.resyncs += 1
            self.sync(self.policy)
        elif not self.awake:
            self.wake_up()

    # --- sharing the GPU with training -----------------------------------------------------
    def sleep(self) -> None:
        """Free the GPU for the training engine (only where the build declares ``sleep``).
        Level 1 (the default) offloads the weights to CPU memory (a copy per worker: 14 GB for
        a 7B model) and drops the KV cache. Level 2 drops the weights too and keeps only named
        buffers, which loses other state some models hold (vLLM issue #29341): the next sync
        reloads the checkpoint (``reload_weights`` from its files) before loading the policy's
        weights over it, and a generation before any sync does that sync itself (``_ready``).
        Called at the end of every generation (``generating``), never by the trainer."""
        if "sleep" not in self.capabilities:
            raise RuntimeError("internal: sleep on a vLLM build that declares none")
        if self.awake:
            self.llm.sleep(level=self.sleep_level)
            self.awake = False
            if self.sleep_level == 2:
                self.weights_current = False

    def _wake(self, tags: list[str] | None) -> None:
        self.empty_cache()  # the update's cached blocks back first, then vLLM maps its own
        self.llm.wake_up(tags=tags)

    def _check_scheduling(self) -> None:
        """After the last wake: vLLM resumes its paused scheduler only once everything is
        awake, and ``LLM.wake_up`` returns nothing to say whether it did; a scheduler left
        paused makes the next generate wait forever."""
        engine = self.llm.llm_engine
        if engine.is_sleeping():
            self.llm.wake_up(tags=["scheduling"])
            if engine.is_sleeping():
                raise RuntimeError("the vLLM engine still reports sleeping after waking its "
                                   "weights, KV cache and scheduler: generate would wait "
                                   "forever")

    def wake_up(self) -> None:
        if not self.awake:
            self._wake(None)
            if self.sleep_level == 2:  # the buffers a level-2 sleep dropped come back
                self.llm.collective_rpc("reload_weights")
            self._check_scheduling()
            self.awake = True
