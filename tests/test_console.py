"""The console of a run: progress lines only, no third-party noise, the table printed last."""
import subprocess
import sys
from pathlib import Path

import pytest

from harness.console.progress import Line, Reporter, play, step_text

ROOT = Path(__file__).resolve().parents[1]
TOY = str(ROOT / "tests" / "plugins" / "toy_task.py")
NOISE = ("Failed to query Ray Train Controller actor state", "Token authentication",
         "PreemptionWatcher", "FutureWarning", "DeprecationWarning", "Setting accelerator to CPU",
         "RayTrainWorker pid=", "Loading weights", "it/s]")


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.text, self.tty = "", tty

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


def _events() -> list[tuple]:
    events: list[tuple] = []
    rep = Reporter("gdpo seed 0", 3, events.append)
    rep.begin_train()
    for k in range(3):
        rep.step({"reward/format": 0.25 * k, "reward/x": float("nan"), "groups_with_signal": 0.5,
                  "time/step": 10.0})
    rep.begin_eval(8)
    rep.eval(4)
    rep.eval(4)
    rep.close()
    return events


def test_terminal_rewrites_one_line_per_phase():
    stream = _Stream(tty=True)
    play(Line(stream), _events())
    lines = stream.text.split("\n")
    assert len(lines) == 3 and lines[-1] == ""  # two finished phases, each ends its line
    assert lines[0].endswith("gdpo seed 0 train: step 3/3 | format 0.50 | signal 0.50 | "
                             "10.0 s/step")
    assert lines[1].endswith("gdpo seed 0 eval: 8/8 items (rank 0's share)")
    assert "\r\x1b[2K" in lines[0]


def test_a_log_file_gets_sparse_plain_lines():
    stream = _Stream(tty=False)
    play(Line(stream, every=3600), _events())
    assert "\r" not in stream.text and "\x1b" not in stream.text
    # a start line and an end line per phase; updates in between are held back
    assert stream.text.splitlines() == [
        "gdpo seed 0 train: step 0/3",
        "gdpo seed 0 train: step 3/3 | format 0.50 | signal 0.50 | 10.0 s/step",
        "gdpo seed 0 eval: 0/8 items",
        "gdpo seed 0 eval: 8/8 items (rank 0's share)"]


def test_step_text_skips_absent_rewards():
    assert step_text({"reward/a": float("nan"), "time/step": 2.0}, 1, 4) == "step 1/4 | 2.0 s/step"


@pytest.mark.model
@pytest.mark.slow
def test_a_ray_run_prints_progress_and_the_table_last_without_noise(tmp_path):
    """A warm-started tiny-random job through Ray Train, its whole output captured."""
    cmd = [sys.executable, "-m", "harness", "run", "--method", "gdpo", "--preset", "smoke-learn",
           "--model", "tiny-random", "--task", "toy", "--plugin", TOY, "--steps", "1",
           "--prompts-per-step", "2", "--group-size", "2", "--max-response-tokens", "6",
           "--eval-max-response-tokens", "4", "--eval-limit", "4", "--warm-start-steps", "2",
           "--warm-start-batch", "2", "--warm-start-layers", "1", "--results-dir", str(tmp_path)]
    import shutil

    from lab.cli import build_parser, overrides_from
    from harness.config import resolve
    from harness.plugins import load_plugins
    from harness.run import of_config

    load_plugins((TOY,))
    args = build_parser().parse_args(cmd[3:])
    folder = of_config(resolve(args.preset, overrides_from(args))).warm_start_folder
    shutil.rmtree(folder, ignore_errors=True)  # the run must train (and show) its warm start
    try:
        out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    for noise in NOISE:
        assert noise not in text, (noise, text[-3000:])
    lines = out.stdout.rstrip().splitlines()
    assert any(line.startswith("warm start: step 2/2 | loss") for line in lines), text
    assert any(line.startswith("gdpo seed 0 train: step 1/1") for line in lines), text
    assert any(line.startswith("gdpo seed 0 eval: 4/4 items") for line in lines), text
    # the table is the last thing printed (title, header, rule, one row), after the training
    # rewards of the first and last steps
    assert lines[-4].startswith("toy | model tiny-random")
    assert "even_rate" in lines[-3] and lines[-1].startswith("gdpo")
    rewards = lines.index("training rewards, step 1 -> step 1 (mean over 1 seed):")
    assert lines[rewards + 1].split()[0] == "parity" and rewards < len(lines) - 4
    assert out.stderr.strip() == "", out.stderr[-3000:]


def test_a_resumed_seed_counts_from_its_checkpoint():
    events: list[tuple] = []
    rep = Reporter("mrtpo seed 1", 30, events.append)
    rep.begin_train()
    rep.step({"step": 16, "time/step": 1.0})
    assert events[-1] == ("update", "step 16/30 | 1.0 s/step | ETA 14 s")


def test_a_step_says_what_runs_inside_it_and_the_run_its_eta(monkeypatch):
    """Inside a long step the line says which part runs and for how long; after each step the
    run's ETA, from the mean step time after the first (its warm-up)."""
    import io

    from harness.console import progress

    events: list[tuple] = []
    rep = Reporter("mrtpo seed 0", 4, events.append)
    rep.begin_train()
    progress.stage("sampling, token 32/96")
    assert events[-1] == ("stage", "step 1: sampling, token 32/96")
    rep.step({"step": 1, "time/step": 100.0})
    assert events[-1][1].endswith("| 100.0 s/step | ETA 5 min 0 s")
    rep.step({"step": 2, "time/step": 20.0})  # the first step's warm-up is left out
    assert events[-1][1].endswith("| 20.0 s/step | ETA 40 s")
    rep.step({"step": 4, "time/step": 20.0})
    assert "ETA" not in events[-1][1]  # the last step: nothing left
    rep.begin_eval(10)
    n = len(events)
    progress.stage("sampling, token 32/96")  # the evaluation's sampling is its own line's
    assert len(events) == n
    rep.close()

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    line = Line(out, tty=True)
    line.start("mrtpo seed 0 train", "step 1/4 | 20.0 s/step")
    line.stage("update, micro-batch 1/4")
    clock[0] = 7.0
    line.stage("update, micro-batch 2/4")  # the same part: its clock keeps running
    clock[0] = 12.0
    line.tick()
    assert out.getvalue().endswith("step 1/4 | 20.0 s/step | update, micro-batch 2/4 (12 s)")
    line.update("step 2/4 | 20.0 s/step")  # a finished step clears the part
    assert out.getvalue().endswith("mrtpo seed 0 train: step 2/4 | 20.0 s/step")


def test_vllms_expected_reload_warnings_are_dropped_and_others_kept(caplog):
    """At every sync vLLM's reload warns that the tied head and the rotary embedding loaded
    nothing (both expected: docs/vllm.md); a layer that truly loads nothing still shows."""
    import logging

    from harness.console import quiet

    quiet.configure_process()
    logger = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for layer in ("ParallelLMHead", "RotaryEmbedding", "Llama3RotaryEmbedding",
                      "QKVParallelLinear"):
            logger.warning("%s: Failed to load weights", layer)
    shown = [r.getMessage() for r in caplog.records]
    assert shown == ["QKVParallelLinear: Failed to load weights"]


def test_a_step_without_an_update_says_its_sync_was_skipped():
    text = step_text({"update_rows": 0.0, "sync/skipped": 1.0, "time/step": 1.0}, 1, 2)
    assert "no reward signal: nothing trained, weights not synced" in text
