"""Registration of the tool-calling family, and that importing it stays cheap."""
import subprocess
import sys
from pathlib import Path

from tasks import TASKS, TRAIN_SETS
from tasks.tools.rewards import REWARDS

ROOT = Path(__file__).resolve().parents[2]


def test_training_sets():
    rlla, synth = TRAIN_SETS.get("rlla"), TRAIN_SETS.get("tools-synth")
    assert rlla.needs_data_dir and not synth.needs_data_dir
    assert rlla.family == synth.family == "tools"
    examples = synth.load(None, 0)
    assert len(examples) == 512 and examples == synth.load(None, 0)


def test_tasks():
    expected = {"bfcl", "bfcl-non-live", "bfcl-live", "bfcl-simple-python", "bfcl-simple-java",
                "bfcl-simple-javascript", "bfcl-multiple", "bfcl-parallel",
                "bfcl-parallel-multiple", "bfcl-live-simple", "bfcl-live-multiple",
                "bfcl-live-parallel", "bfcl-live-parallel-multiple"}
    assert expected <= set(TASKS.names())
    for name in expected:
        task = TASKS.get(name)
        assert task.rewards == REWARDS and task.train_sets == ("rlla", "tools-synth")
        assert task.headline and "format_rate" in task.headline
    assert TASKS.get("bfcl").headline == ("non_live_overall", "live_overall", "format_rate")


def test_import_is_cheap():
    code = ("import sys, tasks; "
            "heavy = [m for m in ('torch', 'bfcl_eval', 'pandas', 'numpy', 'pyarrow') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
