"""scripts/stage.py, the GPU check's stage runner: a stage is judged by its own CPU time, so a
busy machine is reported as busy, never as a failed stage, and a real fault still fails."""
import subprocess
import sys
from pathlib import Path

import pytest

STAGE = Path(__file__).resolve().parents[1] / "scripts" / "stage.py"
SPIN = [sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"]


def stage(tmp_path, *limits, cmd):
    report = tmp_path / "report.md"
    done = subprocess.run([sys.executable, str(STAGE), "s", str(tmp_path / "s.log"), str(report),
                           *limits, "--", *cmd], capture_output=True, text=True, timeout=120)
    return done.returncode, report.read_text(), done.stdout


def test_a_passing_stage_is_reported_with_its_figures(tmp_path):
    rc, report, out = stage(tmp_path, "--cpu-seconds", "30", "--wall-seconds", "30",
                            cmd=[sys.executable, "-c", "print('hello')"])
    assert rc == 0 and out == "hello\n" and (tmp_path / "s.log").read_text() == "hello\n"
    assert report.startswith("| s | passed |")


@pytest.mark.parametrize("limits, cmd, rc, verdict", [
    (("--cpu-seconds", "30", "--wall-seconds", "30"),
     [sys.executable, "-c", "raise SystemExit(3)"], 3, "failed (exit 3)"),
    (("--cpu-seconds", "1", "--wall-seconds", "60"), SPIN, 124, "ran past its 1 CPU-seconds"),
    (("--cpu-seconds", "30", "--wall-seconds", "60", "--stall-seconds", "2"),
     ["sleep", "30"], 124, "hung: no CPU used for 2 s"),
])
def test_a_real_fault_fails_the_stage(tmp_path, limits, cmd, rc, verdict):
    got, report, _ = stage(tmp_path, *limits, cmd=cmd)
    assert got == rc and verdict in report


def test_a_busy_machine_is_reported_as_busy_not_as_a_failed_stage(tmp_path):
    """Two `yes > /dev/null` beside a stage that works past its wall-clock backstop: the
    verdict is the machine's load (exit 75), and the stage's own CPU budget is untouched."""
    hogs = [subprocess.Popen(["sh", "-c", "exec yes > /dev/null"]) for _ in range(2)]
    try:
        rc, report, _ = stage(tmp_path, "--cpu-seconds", "600", "--wall-seconds", "3", cmd=SPIN)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert rc == 75, report
    assert "not decided: the machine was busy" in report
