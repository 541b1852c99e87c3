"""reproduce --recheck: one seed per cell rerun on this code; identical per-step metrics, final
parameters and evaluation re-stamp the cell's seeds of that same old code, anything else
re-stamps nothing and says what differs."""
import json
from dataclasses import replace

import pytest

from harness import provenance
from harness.results import atomic_write_json, atomic_write_jsonl, load_result, result_path
from lab import cli
from lab.reports import plan as planning, recheck, spec as specs

HERE = {"commit": "9" * 40, "dirty": False, "fingerprint": "f" * 16,
        "machine": {"arch": "x86_64", "isa": "AVX512", "bf16": True, "amx": True, "gpus": []}}


def old(letter, bf16=True):
    return {"commit": letter * 40, "dirty": False, "fingerprint": letter * 16,
            "machine": {"bf16": bf16, "inferred_from": "mean time/generate 6 s a step"}}


def write_seed(path, config, seed, prov, reward=0.5, sha="ab" * 32, step_time=2.0,
               predictions=True, config_hash="c" * 16):
    atomic_write_jsonl(path.with_suffix(".train.jsonl"),
                       [{"step": 1, "reward/format": reward, "time/step": step_time},
                        {"step": 2, "reward/format": reward + 0.25, "time/step": step_time}])
    if predictions:
        atomic_write_jsonl(path.with_suffix(".predictions.jsonl"),
                           [{"id": "x1", "correct": True, "response": "a"},
                            {"id": "x2", "correct": False, "response": "b"}])
    atomic_write_json(path, {"task": config.task.task, "method": config.method.method,
                             "model": config.model.model, "seed": seed,
                             "metrics": {"non_live_overall": 50.0, "live_overall": 1.0,
                                         "format_rate": 50.0},
                             "num_eval_items": 2, "wall_seconds": 10.0 * step_time,
                             "train": {"steps": 2, "final_param_sha256": sha,
                                       "time/step/mean": step_time},
                             "config": config.to_dict(), "config_hash": config_hash,
                             "data": {"eval": "e", "train": "t"}, "versions": {},
                             "git_commit": prov["commit"], "provenance": prov})


@pytest.fixture
def table3(tmp_path, monkeypatch):
    """Table 3's smoke cells stored under tmp_path: MRTPO's seeds 0 and 1 by code "a", seed 2 by
    code "b"; every other cell by this code. ``rerun`` is what the fake rerun writes."""
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(): dict(HERE))
    monkeypatch.setattr(provenance, "fingerprint", lambda root=None, plugins=(): HERE[
        "fingerprint"])
    monkeypatch.setattr(provenance, "machine", lambda: dict(HERE["machine"]))
    plan = planning.make_plan(specs.get("table3"), "smoke", None, str(tmp_path))
    stamps = {0: old("a"), 1: old("a"), 2: old("b")}
    for job in plan.jobs:
        for s in job.seeds:
            prov = stamps[s] if job.row.label == "MRTPO" else dict(HERE)
            write_seed(result_path(job.seed_config(s)), job.seed_config(s), s, prov)
    rerun = {"reward": 0.5, "sha": "ab" * 32, "calls": [], "predictions": True, "lr": None}

    def fake_run_seeds(run, seeds, log=print, force=False):
        config = run.config
        assert force and config.results_dir.endswith("/checks/recheck/" + "f" * 16)
        for s in seeds:
            c = replace(config, seed=s)
            rerun["calls"].append(c)
            written = c if rerun["lr"] is None else replace(c, training=replace(
                c.training, lr=rerun["lr"]))
            write_seed(result_path(c), written, s, dict(HERE), rerun["reward"], rerun["sha"],
                       step_time=3.5,  # other times: they are never compared
                       predictions=rerun["predictions"],
                       config_hash="d" * 16)  # a hash over fields old code did not know
        return []

    import harness.launch
    import harness.preflight

    # never the project's own warm-start cache: set_aside_other_warm_start is tested below
    monkeypatch.setattr(recheck, "set_aside_other_warm_start",
                        lambda run, fingerprint, log: rerun["set_aside"].append(run.config))
    rerun["set_aside"] = []
    monkeypatch.setattr(harness.launch, "run_seeds", fake_run_seeds)
    monkeypatch.setattr(harness.preflight, "problems", lambda run: [])
    return tmp_path, rerun


def _plan(tmp_path):
    return planning.make_plan(specs.get("table3"), "smoke", None, str(tmp_path))


def test_an_identical_rerun_restamps_the_seeds_of_the_same_old_code(table3):
    tmp_path, rerun = table3
    outcomes = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert [(o.job.row.label, o.seed, o.restamped) for o in outcomes] == [("MRTPO", 0, [0, 1])]
    assert len(rerun["calls"]) == 1 and rerun["calls"][0].seed == 0
    assert rerun["set_aside"] == [rerun["calls"][0]]  # before the rerun, for its settings
    job = next(j for j in _plan(tmp_path).jobs if j.row.label == "MRTPO")
    for s in (0, 1):
        prov = load_result(job.seed_run(s).result)["provenance"]
        assert prov["fingerprint"] == "f" * 16 and prov["commit"] == "a" * 40
        assert prov["recheck"]["from_fingerprint"] == "a" * 16
        assert prov["recheck"]["checked_seed"] == 0
    # seed 2, made by other old code, stays stale: nothing showed that code's equivalence
    assert job.stale == (2,)
    record = json.loads(outcomes[0].record.read_text())
    assert record["identical"] and record["from"]["fingerprint"] == "a" * 16
    assert record["to"]["fingerprint"] == "f" * 16
    assert record["compared"]["final_param_sha256"] == "ab" * 32
    assert record["compared"]["train_log_lines"] == 2 and record["compared"]["predictions"] == 2
    assert "identical: seeds [0, 1] re-stamped" in recheck.summary(outcomes)
    # a second pass finds seed 2 alone and reruns it (code "b" is another check)
    again = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert [(o.seed, o.restamped) for o in again] == [(2, [2])]


def test_a_rerun_that_differs_restamps_nothing_and_names_the_difference(table3):
    tmp_path, rerun = table3
    rerun["reward"] = 0.5 + 2 ** -20  # one logged metric, last bits
    outcomes = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    (o,) = outcomes
    assert o.restamped == [] and any("train.jsonl line 1 reward/format" in d
                                     for d in o.differences)
    job = next(j for j in _plan(tmp_path).jobs if j.row.label == "MRTPO")
    assert job.stale == (0, 1, 2)
    assert not json.loads(o.record.read_text())["identical"]
    assert "differs" in recheck.summary(outcomes)


def test_other_final_parameters_alone_are_a_difference(table3, tmp_path):
    _, rerun = table3
    rerun["sha"] = "cd" * 32
    (o,) = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert o.restamped == [] and o.differences == [
        f"train final_param_sha256: stored \"{'ab' * 32}\", rerun \"{'cd' * 32}\""]


def test_other_settings_are_a_difference(table3, tmp_path):
    _, rerun = table3
    rerun["lr"] = 3e-5
    (o,) = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert o.restamped == [] and len(o.differences) == 1
    assert o.differences == ["settings lr: stored 1e-05, rerun 3e-05"]


def test_predictions_written_by_one_run_only_are_a_difference(table3, tmp_path):
    _, rerun = table3
    rerun["predictions"] = False
    (o,) = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert o.differences == ["predictions.jsonl: rerun file missing"]


def test_a_seed_of_another_kind_of_machine_is_not_checked(table3, tmp_path):
    _, rerun = table3
    job = next(j for j in _plan(tmp_path).jobs if j.row.label == "MRTPO")
    for s in (0, 1, 2):
        write_seed(job.seed_run(s).result, job.seed_config(s), s, old("a", bf16=False))
    (o,) = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert rerun["calls"] == [] and "without bf16 kernels" in o.skipped
    assert "not checked" in recheck.summary([o])


def test_a_dirty_tree_restamps_nothing(table3, tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(): dict(
        HERE, dirty=True))
    (o,) = recheck.recheck(_plan(tmp_path), str(tmp_path), log=lambda *_: None)
    assert o.differences == [] and o.restamped == [] and "uncommitted" in o.skipped


def test_the_command_line_checks_then_renders_from_the_restamped_seeds(table3, capsys):
    tmp_path, rerun = table3
    # without predictions (the render then reads the seeds' metrics alone)
    for job in _plan(tmp_path).jobs:
        for s in job.seeds:
            prov = old("a") if job.row.label == "MRTPO" else dict(HERE)
            write_seed(job.seed_run(s).result, job.seed_config(s), s, prov, predictions=False)
            job.seed_run(s).result.with_suffix(".predictions.jsonl").unlink()
    rerun["predictions"] = False
    args = ["reproduce", "table3", "--results-dir", str(tmp_path), "--output-dir",
            str(tmp_path)]
    assert cli.main([*args, "--recheck", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "recheck bfcl         MRTPO          seed 0" in out and "1 cell(s) to recheck" in out
    assert not (tmp_path / "checks").exists()  # a dry run runs and writes nothing
    assert cli.main([*args, "--recheck", "--render-only"]) == 0
    out = capsys.readouterr().out
    assert "identical: seeds [0, 1, 2] re-stamped" in out
    mrtpo = [x for x in out.splitlines() if x.startswith("  bfcl") and " MRTPO " in x]
    assert "stale" in mrtpo[0] and "stale" not in mrtpo[-1]
    assert "Code: one version" in (tmp_path / "tables" / "table3.md").read_text()


def test_a_warm_start_cached_by_other_code_is_moved_aside_not_deleted(tmp_path):
    """The rerun must not reuse a warm start another version trained (it would feed the new
    code the old code's model); one this code trained is kept."""
    from harness.config import resolve
    from harness.warmstart import cache

    from harness.run import of_config
    from harness.warmstart.data import content_hash

    config = of_config(resolve("smoke-learn", {"task": "bfcl"}))
    folder = cache.folder(config, content_hash(config.demonstrations), tmp_path)
    folder.mkdir(parents=True)
    (folder / cache.MARKER).write_text(json.dumps({"history": []}))  # no provenance: old
    said = []
    recheck.set_aside_other_warm_start(config, "f" * 16, said.append, cache_dir=tmp_path)
    aside = folder.with_name(folder.name + ".other-code-1")
    assert not folder.exists() and (aside / cache.MARKER).is_file() and "moved" in said[0]
    folder.mkdir()
    (folder / cache.MARKER).write_text(json.dumps({"provenance": {"fingerprint": "f" * 16}}))
    recheck.set_aside_other_warm_start(config, "f" * 16, said.append, cache_dir=tmp_path)
    assert folder.is_dir() and len(said) == 1  # this code's: kept
    (folder / cache.MARKER).write_text(json.dumps({"provenance": {"fingerprint": "e" * 16}}))
    recheck.set_aside_other_warm_start(config, "f" * 16, said.append, cache_dir=tmp_path)
    assert folder.with_name(folder.name + ".other-code-2").is_dir() and not folder.exists()


@pytest.mark.unit
def test_a_seed_of_another_kind_or_thread_count_is_not_rechecked_and_says_why():
    """Another instruction set, AMX or not, or another torch thread count computes other sums:
    a rerun here would differ whatever the code, so it is refused with the reason and the ways
    on, not made; a record without those fields is checked as before."""
    here = HERE["machine"]

    def made_on(**machine):
        return {"provenance": {**HERE, "machine": {**here, **machine}}}

    assert recheck.machine_problem(made_on(threads=2), here, 2) == ""
    assert recheck.machine_problem(made_on(), here, 1) == ""  # no count recorded
    why = recheck.machine_problem(made_on(threads=1), here, 2)
    assert "made at 1 torch threads, a rerun here at 2" in why and "--cpus-per-worker 1" in why
    assert "instruction set AVX2" in recheck.machine_problem(made_on(isa="AVX2"), here, 2)
    assert "AMX False" in recheck.machine_problem(made_on(amx=False), here, 2)
    assert "--rerun-stale" in recheck.machine_problem(made_on(bf16=False), here, 2)
