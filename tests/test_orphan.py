"""A process armed with harness.orphan exits (code 70, writing nothing) once its parent dies,
and check() before a write stops it even between two polls; unarmed processes are unaffected."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
from harness import orphan
orphan.arm(poll={poll})
print(os.getpid(), flush=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    time.sleep(0.05)
    if {write_each_loop}:
        orphan.check()
        open({marker!r}, "a").write("x")
open({marker!r} + ".survived", "w").write("the orphan ran on")
"""

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)
child.stdout.close()
import time; time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _orphan_after_parent_dies(tmp_path, poll: float, write_each_loop: bool) -> tuple[int, Path]:
    marker = tmp_path / "writes"
    child = CHILD.format(root=str(ROOT), poll=poll, write_each_loop=write_each_loop,
                         marker=str(marker))
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(child=child)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    pid = int(parent.stdout.readline())
    time.sleep(0.3)
    assert _alive(pid)
    os.kill(parent.pid, signal.SIGKILL)  # the "raylet" dies; the child is re-parented
    parent.wait()
    return pid, marker


def test_an_armed_process_exits_when_its_parent_dies(tmp_path):
    pid, marker = _orphan_after_parent_dies(tmp_path, poll=0.1, write_each_loop=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the orphan is still running 10 s after its parent died"
    assert not Path(str(marker) + ".survived").exists()


def test_check_before_a_write_stops_an_orphan_between_polls(tmp_path):
    # a watchdog that would poll only after 60 s: the check before each write does the work
    pid, marker = _orphan_after_parent_dies(tmp_path, poll=60, write_each_loop=True)
    written = marker.read_text() if marker.exists() else ""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)
    # at most the write that was under way when the parent died
    assert len(marker.read_text() if marker.exists() else "") <= len(written) + 1


def test_check_does_nothing_in_an_unarmed_process():
    from harness import orphan

    assert not orphan.orphaned()
    orphan.check()  # returns: in-process runs have no raylet to lose
