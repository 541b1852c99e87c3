"""Progress of a run on the driver's console: one line per phase.

Workers never print progress themselves (their output does not reach the driver: see
``harness.console.quiet``). Rank 0 sends small events to a ``ProgressSink`` actor; the driver
polls it while ``fit`` runs and draws them with a :class:`Line`: in a terminal one line per
phase, rewritten in place; otherwise (a log file, CI) a plain line when a phase starts, at most
every ``every`` seconds while it runs, and when it ends.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional, TextIO

SINK_NAME = "harness-progress"
# rank 0's reporter while a seed trains: what ``stage`` tells (no one elsewhere)
_LISTENERS: list[Callable[[str], None]] = []


def stage(text: str) -> None:
    """Tell the console which part of a training step runs now (``sampling, token 64/512``,
    ``update, micro-batch 2/4``): shown after the step's line with its elapsed seconds, so a
    long step shows what it is doing. A no-op where no seed's reporter listens."""
    for listen in _LISTENERS:
        listen(text)


def eta_text(seconds: float) -> str:
    """``ETA 4 min 10 s`` (``ETA 35 s`` under a minute)."""
    s = int(round(seconds))
    return f"ETA {s // 60} min {s % 60} s" if s >= 60 else f"ETA {s} s"


class Line:
    """One progress line per phase (``start`` / ``update`` / ``finish``)."""

    def __init__(self, stream: TextIO | None = None, every: float = 30.0,
                 tty: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every
        self.phase: str | None = None
        self.text = ""
        self.doing = ""  # the part of a step that runs now (``stage``), and since when
        self.doing_since = 0.0
        self.last_print = 0.0
        self.last_line = ""

    def start(self, phase: str, text: str = "") -> None:
        if self.phase is not None:
            self.finish()
        self.phase, self.text, self.doing = phase, text, ""
        self._draw(force=True)

    def update(self, text: str) -> None:
        self.text, self.doing = text, ""
        self._draw(force=False)

    def stage(self, doing: str) -> None:
        """A part of the current step: drawn after the line, with its elapsed seconds."""
        if doing.split(",")[0] != self.doing.split(",")[0]:
            self.doing_since = time.monotonic()
        self.doing = doing
        self._draw(force=False)

    def tick(self) -> None:
        """Redraw the elapsed seconds of the running part (a terminal; a log file at most
        every ``every`` seconds)."""
        if self.phase is not None and self.doing:
            self._draw(force=False)

    def finish(self, text: str | None = None) -> None:
        if self.phase is None:
            return
        if text is not None:
            self.text = text
        if self.tty:
            self._write(f"\r\x1b[2K{self._line()}\n")
        elif self._line() != self.last_line:  # a log file: no repeat of the line just printed
            self._write(self._line() + "\n")
        self.phase = None

    def _line(self) -> str:
        text = self.text
        if self.doing:
            since = time.monotonic() - self.doing_since
            text = f"{text} | {self.doing} ({since:.0f} s)" if text else self.doing
        return f"{self.phase}: {text}" if text else f"{self.phase}"

    def _draw(self, force: bool) -> None:
        if self.tty:
            self._write(f"\r\x1b[2K{self._line()}")
        elif force or time.monotonic() - self.last_print >= self.every:
            self._write(self._line() + "\n")
            self.last_print = time.monotonic()

    def _write(self, text: str) -> None:
        if not self.tty:
            self.last_line = text.rstrip("\n")
        self.stream.write(text)
        self.stream.flush()


def step_text(metrics: dict, done: int, total: int, eta: float | None = None) -> str:
    """``step 3/8 | format 0.50, correctness -1.25 | signal 0.50 | 31.2 s/step | ETA 2 min
    36 s`` (``eta``: seconds the remaining steps are expected to take)."""
    rewards = [f"{k.split('/')[-1]} {v:.2f}" for k, v in metrics.items()
               if k.startswith("reward/") and v == v]  # NaN: a reward no prompt of the step had
    parts = [f"step {done}/{total}"]
    if rewards:
        parts.append(", ".join(rewards))
    if "groups_with_signal" in metrics:
        parts.append(f"signal {metrics['groups_with_signal']:.2f}")
    from harness.train.store import trained_nothing

    if trained_nothing(metrics):
        parts.append("no reward signal: nothing trained" + (
            ", weights not synced" if metrics.get("sync/skipped") else ""))
    parts.append(f"{metrics.get('time/step', 0.0):.1f} s/step")
    if eta is not None and done < total:
        parts.append(eta_text(eta))
    return " | ".join(parts)


class Reporter:
    """What rank 0 calls during a seed or a warm start; forwards events to ``send``."""

    def __init__(self, label: str, steps: int, send: Callable[[tuple], None]) -> None:
        self.label, self.steps, self.send = label, steps, send
        self.done = 0
        self.evaluated = 0
        self.eval_total: Optional[int] = None
        self.step_times: list[float] = []

    def begin_train(self) -> None:
        self.send(("start", f"{self.label} train", f"step 0/{self.steps}"))
        _LISTENERS[:] = [self.stage]  # the steps' parts, until the evaluation

    def stage(self, text: str) -> None:
        # the step it belongs to: the line still shows the last finished one's numbers
        self.send(("stage", f"step {self.done + 1}: {text}"))

    def step(self, metrics: dict) -> None:
        # a resumed seed's first step is the checkpoint's next one, not 1
        self.done = int(metrics.get("step", self.done + 1))
        self.step_times.append(float(metrics.get("time/step", 0.0)))
        # the mean of the steps after the first (whose kernels and caches warm up), once any
        later = self.step_times[1:] or self.step_times
        eta = sum(later) / len(later) * (self.steps - self.done)
        self.send(("update", step_text(metrics, self.done, self.steps, eta)))

    def begin_eval(self, total: int) -> None:
        _LISTENERS.clear()
        self.eval_total = total
        self.send(("start", f"{self.label} eval", f"0/{total} items"))

    def eval(self, n: int) -> None:
        self.evaluated += n
        self.send(("update", f"{self.evaluated}/{self.eval_total} items (rank 0's share)"))

    def sft_step(self, record: dict) -> None:
        self.done += 1
        self.send(("update", f"step {self.done}/{self.steps} | loss {record['loss']:.3f} | "
                             f"{record['time']:.1f} s/step"))

    def close(self) -> None:
        _LISTENERS.clear()
        self.send(("finish",))


def play(line: Line, events: list[tuple]) -> None:
    for event in events:
        kind = event[0]
        if kind == "start":
            line.start(event[1], event[2])
        elif kind == "update":
            if line.phase is not None:
                line.update(event[1])
        elif kind == "stage":
            if line.phase is not None:
                line.stage(event[1])
        elif kind == "finish":
            line.finish()


def make_sink():
    """A named actor that buffers events (0 CPUs: it must not take a worker's slot)."""
    import ray

    @ray.remote(num_cpus=0)
    class ProgressSink:
        def __init__(self) -> None:
            self.events: list[tuple] = []

        def put(self, event: tuple) -> None:
            self.events.append(event)

        def drain(self) -> list[tuple]:
            out, self.events = self.events, []
            return out

    return ProgressSink.options(name=SINK_NAME).remote()


def worker_reporter(label: str, steps: int) -> Reporter:
    """Rank 0's reporter inside a Ray worker: fire-and-forget calls to the driver's sink."""
    import ray

    sink = ray.get_actor(SINK_NAME)
    return Reporter(label, steps, lambda event: sink.put.remote(event))


def run_with_progress(fn: Callable[[], None], line: Line | None = None,
                      poll: float = 2.0) -> None:
    """Run ``fn`` (a blocking ``fit``) while drawing the sink's events on ``line``. Every poll
    is an actor call: at 0.5 s the sink took ~1.3 % of two cores (``bench launch``), while a
    step's events come seconds apart."""
    import ray

    line = line or Line()
    sink = make_sink()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # re-raised in the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(poll)
            play(line, ray.get(sink.drain.remote()))
            line.tick()
        play(line, ray.get(sink.drain.remote()))
        line.finish()
    finally:
        ray.kill(sink)
    if failure:
        raise failure[0]
