"""Start-up marks on one clock (harness.startup), their timeline in bench launch, and
DeepSpeed's import without MLflow's."""
import subprocess
import sys
import time

from harness import startup
from lab.bench.launch import timeline


def test_clock_counts_from_the_drivers_start_and_keeps_its_marks():
    origin = time.time() - 10.0  # a driver that started 10 s ago
    clock = startup.Clock({"origin": origin, "marks": {"run_checked": 3.0}})
    clock.mark("trainer_begin")
    m = clock.metrics()
    assert m["time/startup/run_checked"] == 3.0
    assert 10.0 <= m["time/startup/trainer_begin"] < 11.0
    # this test's process started before the fake driver's clock: a negative age is kept as is
    assert "time/startup/worker_process_started" in m
    assert list(m) == sorted(m, key=m.get)  # in time order


def test_clock_without_a_driver_counts_from_its_own_process():
    clock = startup.Clock()
    clock.mark("x")
    assert abs(clock.marks["x"] - (time.time() - startup.process_start())) < 1.0
    assert "worker_process_started" not in clock.marks


def test_driver_marks_are_set_once():
    startup._MARKS.pop("test_once", None)
    startup.mark("test_once")
    first = startup._MARKS["test_once"]
    time.sleep(0.01)
    startup.mark("test_once")
    assert startup.handoff()["marks"]["test_once"] == first
    startup.mark("test_once", again=True)  # each fit's own fit_called
    assert startup.handoff()["marks"]["test_once"] > first
    startup._MARKS.pop("test_once")


def test_timeline_phases_are_differences_and_skip_the_pooled_process():
    rows = timeline({"cli_ready": 1.0, "ray_started": 6.0, "worker_process_started": 2.0,
                     "worker_entry": 9.5})
    assert [r[0] for r in rows] == ["cli_ready", "worker_process_started", "ray_started",
                                    "worker_entry"]
    assert [r[2] for r in rows] == [1.0, "", 5.0, 3.5]


def test_deepspeed_imports_without_mlflow_and_leaves_it_importable():
    code = ("import sys; from harness.engine import import_deepspeed; ds = import_deepspeed(); "
            "assert 'mlflow' not in sys.modules, 'mlflow imported'; "
            "assert ds.autotuning.autotuner.has_mlflow is False; "
            "import mlflow; assert mlflow.__name__ == 'mlflow'; "
            "assert import_deepspeed() is ds; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
