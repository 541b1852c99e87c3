"""Results store: atomic writes, per-seed identity, skipping stored seeds, mean ± std tables."""
import json
import math
import os

import pytest

from harness import cli
from harness.config import resolve
from harness.results import atomic_write_json, result_path, stored_seeds
from harness.reports.aggregate import cell, mean_std


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"v": 1})

    def boom(*a, **k):
        raise KeyboardInterrupt  # a kill in the middle of the write

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


def test_result_identity_separates_settings(tmp_path):
    base = resolve("smoke", {"results_dir": str(tmp_path)})
    other = resolve("smoke", {"results_dir": str(tmp_path), "group_size": 8})
    runtime_only = resolve("smoke", {"results_dir": str(tmp_path), "workers": 2})
    assert result_path(base) != result_path(other)
    assert result_path(base) == result_path(runtime_only)
    assert result_path(base).parent.name == "smoke"
    assert result_path(other).parent.name.startswith("smoke-")


def test_mean_and_sample_std():
    mean, std = mean_std([1.0, 2.0, 4.0])
    assert math.isclose(mean, 7 / 3)
    # sample std: sqrt(((1-7/3)^2 + (2-7/3)^2 + (4-7/3)^2) / 2) = sqrt(14/3 / 2) = 1.5275
    assert math.isclose(std, math.sqrt(7 / 3))
    assert cell([1.0, 2.0, 4.0]) == "2.33 ± 1.53"
    assert cell([5.0]) == "5.00"


def _store(config, seed, value):
    from dataclasses import replace

    seeded = replace(config, seed=seed)
    path = result_path(seeded)
    atomic_write_json(path, {"metrics": {"non_live_overall": value, "live_overall": value / 2,
                                         "format_rate": 50.0},
                             "train": {"time/step/mean": 3.0}, "config": seeded.to_dict()})
    return path


def test_run_skips_stored_seeds_and_prints_table(tmp_path, capsys):
    config = resolve("smoke", {"results_dir": str(tmp_path), "method": "gdpo", "task": "bfcl"})
    _store(config, 0, 10.0)
    _store(config, 1, 20.0)
    assert sorted(stored_seeds(config)) == [0, 1]
    # every seed is stored: no worker starts, the table is printed from the files
    rc = cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--preset", "smoke", "--seeds",
                   "2", "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.count("(skipped; --force reruns it)") == 2
    assert "15.00 ± 7.07" in out  # mean and sample std of 10 and 20
    assert "7.50 ± 3.54" in out


def test_unknown_names_fail_with_suggestions(capsys):
    assert cli.main(["run", "--method", "gdpoo", "--task", "bfcl"]) == 2
    assert "Did you mean 'gdpo'" in capsys.readouterr().err
    assert cli.main(["run", "--task", "bfcl-lvie"]) == 2
    assert "Did you mean 'bfcl-live'" in capsys.readouterr().err
    assert cli.main(["run", "--preset", "smok"]) == 2
    assert "Did you mean 'smoke'" in capsys.readouterr().err


def test_a_stored_seed_from_other_settings_is_not_pooled(tmp_path, capsys):

    config = resolve("smoke", {"results_dir": str(tmp_path), "method": "gdpo", "task": "bfcl"})
    path = _store(config, 0, 10.0)
    # the same folder, but the stored run used another learning rate (an edited preset, say)
    data = json.loads(path.read_text())
    data["config"]["training"]["lr"] = 0.5
    atomic_write_json(path, data)
    rc = cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--seeds", "1",
                   "--results-dir", str(tmp_path)])
    assert rc == 2 and "made with other settings" in capsys.readouterr().err


def test_training_set_and_local_model_are_part_of_the_identity(tmp_path):
    offline = resolve("smoke", {"results_dir": str(tmp_path)})
    published = resolve("smoke", {"results_dir": str(tmp_path), "data_dir": str(tmp_path)})
    assert result_path(offline).parent.name == "smoke"
    assert result_path(published).parent.name == "smoke+rlla"
    a, b = tmp_path / "a" / "hf", tmp_path / "b" / "hf"
    a.mkdir(parents=True), b.mkdir(parents=True)
    pa = result_path(resolve("smoke", {"results_dir": str(tmp_path), "model": str(a)}))
    pb = result_path(resolve("smoke", {"results_dir": str(tmp_path), "model": str(b)}))
    assert pa != pb and pa.parent.parent.name.startswith("hf-")
