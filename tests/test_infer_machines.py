"""scripts/infer_machines.py: seeds stored before machines were recorded are marked with what
their own step times show (bf16 kernels or none), an evaluation-only seed with its session's
kind; ambiguous times are refused; a seed that records its machine is left as it is."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
spec = importlib.util.spec_from_file_location("infer_machines", ROOT / "scripts" / "infer_machines.py")
infer_machines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(infer_machines)


def seed(root, rel, generate, started, machine=None):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    prov = {"commit": "a" * 40, "dirty": False, "fingerprint": "f" * 16}
    if machine:
        prov["machine"] = machine
    train = {} if generate is None else {"time/generate/mean": generate, "steps": 3}
    path.write_text(json.dumps({"provenance": prov, "train": train, "metrics": {"x": 1.0}}))
    logs = path.parent / "tensorboard" / path.stem
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"events.out.tfevents.{started}.vm.1.0").write_text("")
    return path


def test_seeds_are_marked_by_their_step_times_and_sessions(tmp_path, capsys):
    fast = seed(tmp_path, "t/gdpo/m/s/seed0.json", 6.2, 1_000_000)
    slow = seed(tmp_path, "t/mrtpo/m/s/seed0.json", 61.0, 1_040_000)
    base = seed(tmp_path, "t/gdpo/m/base/seed0.json", None, 1_000_600)  # 10 min after `fast`
    kept = {"arch": "x86_64", "isa": "AVX2", "bf16": False, "amx": False, "gpus": [], "cpu": "x"}
    recorded = seed(tmp_path, "t/grpo/m/s/seed0.json", 6.0, 1_000_000, machine=kept)
    before = recorded.read_text()
    assert infer_machines.main(["--results-dir", str(tmp_path), "--check"]) == 1
    assert "machine" not in json.loads(fast.read_text())["provenance"]  # --check writes nothing
    assert infer_machines.main(["--results-dir", str(tmp_path)]) == 0
    got = {p: json.loads(p.read_text())["provenance"]["machine"] for p in (fast, slow, base)}
    assert got[fast]["bf16"] is True and "6.2 s a step" in got[fast]["inferred_from"]
    assert got[slow]["bf16"] is False and "61.0 s a step" in got[slow]["inferred_from"]
    assert got[base]["bf16"] is True
    assert got[base]["inferred_from"].startswith("the machine of t/gdpo/m/s/seed0.json, "
                                                 "started 10 min apart")
    assert recorded.read_text() == before
    assert json.loads(fast.read_text())["metrics"] == {"x": 1.0}
    assert infer_machines.main(["--results-dir", str(tmp_path), "--check"]) == 0  # all marked


def test_an_ambiguous_time_or_a_lone_evaluation_is_refused(tmp_path):
    seed(tmp_path, "t/gdpo/m/s/seed0.json", 30.0, 1_000_000)
    with pytest.raises(SystemExit, match="30.0 s a step lies between 25 and 40 s"):
        infer_machines.main(["--results-dir", str(tmp_path)])
    other = tmp_path / "other"
    seed(other, "t/gdpo/m/s/seed0.json", 6.0, 1_000_000)
    seed(other, "t/gdpo/m/base/seed0.json", None, 1_000_000 + 5 * 3600)
    with pytest.raises(SystemExit, match="no trained seed started within 3 h"):
        infer_machines.main(["--results-dir", str(other)])
    assert all("machine" not in json.loads(p.read_text())["provenance"]
               for p in other.rglob("seed0.json"))  # nothing written


def test_every_committed_seed_with_provenance_says_its_machine():
    assert infer_machines.main(["--check"]) == 0
