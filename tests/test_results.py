"""Results store: atomic writes, per-seed identity, skipping stored seeds, mean ± std tables."""
import json
import math
import os

import pytest

from lab import cli
from harness.config import resolve
from harness.results import atomic_write_json, make_record, result_path, stored_seeds
from lab.reports.aggregate import cell, mean_std


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
    atomic_write_json(path, make_record(
        seeded, {"non_live_overall": value, "live_overall": value / 2, "format_rate": 50.0},
        train={"time/step/mean": 3.0}, wall_seconds=1.0))
    return path


@pytest.mark.model
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


@pytest.mark.model
def test_unknown_names_fail_with_suggestions(capsys):
    assert cli.main(["run", "--method", "gdpoo", "--task", "bfcl"]) == 2
    assert "Did you mean 'gdpo'" in capsys.readouterr().err
    assert cli.main(["run", "--method", "gdpo", "--task", "bfcl-lvie"]) == 2
    assert "Did you mean 'bfcl-live'" in capsys.readouterr().err
    assert cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--preset", "smok"]) == 2
    assert "Did you mean 'smoke'" in capsys.readouterr().err


@pytest.mark.model
def test_a_stored_seed_from_other_settings_is_not_pooled(tmp_path, capsys):
    from dataclasses import replace

    config = resolve("smoke", {"results_dir": str(tmp_path), "method": "gdpo", "task": "bfcl"})
    path = _store(config, 0, 10.0)
    # the same folder, but the stored run used another learning rate (an edited preset, say)
    stored = replace(config, training=replace(config.training, lr=0.5))
    data = make_record(stored, {"non_live_overall": 1.0}, train={}, wall_seconds=1.0)
    atomic_write_json(path, data)
    rc = cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--seeds", "1",
                   "--results-dir", str(tmp_path)])
    assert rc == 2 and "made with other settings" in capsys.readouterr().err


def test_training_set_and_local_model_are_part_of_the_identity(tmp_path):
    offline = resolve("smoke", {"results_dir": str(tmp_path)})
    (tmp_path / "train.parquet").write_bytes(b"")  # RLLA's train file: the published set
    published = resolve("smoke", {"results_dir": str(tmp_path), "data_dir": str(tmp_path)})
    assert result_path(offline).parent.name == "smoke"
    assert result_path(published).parent.name == "smoke+rlla"
    a, b = tmp_path / "a" / "hf", tmp_path / "b" / "hf"
    a.mkdir(parents=True), b.mkdir(parents=True)
    pa = result_path(resolve("smoke", {"results_dir": str(tmp_path), "model": str(a)}))
    pb = result_path(resolve("smoke", {"results_dir": str(tmp_path), "model": str(b)}))
    assert pa != pb and pa.parent.parent.name.startswith("hf-")


# -- integrity: schema, hashes, corrupt and foreign files -------------------------------------
def _record(tmp_path, seed=0, **overrides):
    from dataclasses import replace

    from tasks.base import Example

    config = replace(resolve("smoke", {"results_dir": str(tmp_path), **overrides}), seed=seed)
    items = [Example(id=f"q{i}", messages=({"role": "user", "content": f"ask {i}"},),
                     reference={"name": "f"}) for i in range(3)]
    return config, make_record(config, {"non_live_overall": 12.5}, train={"steps": 1},
                               wall_seconds=2.0, train_examples=items, eval_examples=items[:2])


def test_a_result_records_its_schema_hashes_versions_and_commit(tmp_path):
    from harness.results import RESULT_SCHEMA, config_hash, load_result

    config, data = _record(tmp_path)
    assert data["schema"] == RESULT_SCHEMA and data["config_hash"] == config_hash(config)
    assert set(data["data"]) == {"train", "eval"} and data["data"]["train"] != data["data"]["eval"]
    assert "torch" in data["versions"] and data["git_commit"]
    assert data["num_eval_items"] == 2
    atomic_write_json(result_path(config), data)
    assert load_result(result_path(config)) == json.loads(json.dumps(data))
    # the hash follows the result-changing settings only
    assert config_hash(resolve("smoke", {"workers": 2})) == config_hash(resolve("smoke", {}))
    assert config_hash(resolve("smoke", {"lr": 0.5})) != config_hash(resolve("smoke", {}))


@pytest.mark.parametrize("damage, message", [
    (lambda text, data: text[: len(text) // 2], "not valid JSON"),
    (lambda text, data: b"\xff\xfe garbage", "not UTF-8"),
    (lambda text, data: json.dumps([1, 2]), "not a result file (a JSON list"),
    (lambda text, data: json.dumps({"rows": [], "report": "bench"}), "missing"),
    (lambda text, data: json.dumps({**data, "schema": 99}), "newer than this harness"),
    (lambda text, data: json.dumps({**data, "metrics": {"acc": "high"}}), "metric 'acc'"),
    (lambda text, data: json.dumps({**data, "seed": "0"}), "field 'seed' is a str"),
    (lambda text, data: json.dumps({**data, "config": {"bogus": {}}}), "config cannot be read"),
    (lambda text, data: json.dumps({**data, "config": {**data["config"], "seed": 7,
                                                       "training": {**data["config"]["training"],
                                                                    "lr": 9.0}}}),
     "config_hash does not match"),
])
def test_corrupt_or_foreign_result_files_are_refused_with_their_path(tmp_path, damage, message):
    from harness.results import ResultError, load_result

    config, data = _record(tmp_path)
    path = result_path(config)
    text = json.dumps(data)
    damaged = damage(text, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode())
    with pytest.raises(ResultError) as err:
        load_result(path)
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.model
def test_a_corrupt_seed_is_reported_never_aggregated(tmp_path, capsys):
    config, data = _record(tmp_path, method="gdpo", task="bfcl")
    atomic_write_json(result_path(config), data)
    bad = result_path(config).with_name("seed1.json")
    bad.write_text('{"metrics": {"non_live_overall": 99.0}}')  # a foreign, partial file
    rc = cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--seeds", "2",
                   "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and "not a result file" in err


def test_committed_results_all_validate():
    from pathlib import Path

    from harness.results import load_result

    root = Path(__file__).resolve().parent.parent / "results"
    paths = [p for p in root.rglob("seed*.json") if p.name.count(".") == 1]
    assert paths, "no committed results found"
    for path in paths:
        load_result(path)


def test_seeds_stored_side_by_side_never_clobber_each_other(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from harness.results import load_result

    def write(seed):
        config, data = _record(tmp_path, seed=seed)
        for _ in range(5):  # rewritten while the others write too
            atomic_write_json(result_path(config), data)
        return config

    with ThreadPoolExecutor(8) as pool:
        configs = list(pool.map(write, range(8)))
    assert sorted(stored_seeds(configs[0])) == list(range(8))
    assert [load_result(result_path(c))["seed"] for c in configs] == list(range(8))
    leftovers = [p.name for p in result_path(configs[0]).parent.iterdir() if p.suffix == ".tmp"]
    assert leftovers == []
