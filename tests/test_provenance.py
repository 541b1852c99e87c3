"""Provenance: the code a seed ran under is recorded at its start and kept through resumes, and
reports pool only seeds of one code version (or footnote the cell when told to)."""
import json

import pytest

from harness import provenance
from lab import cli
from lab.reports import plan as planning, spec as specs
from harness.results import atomic_write_json, atomic_write_jsonl, result_path


def store(job, seed, value, prov):
    path = result_path(job.seed_config(seed))
    atomic_write_jsonl(path.with_suffix(".train.jsonl"),
                       [{"step": 1, "reward/format": 0.1, "time/step": 2.0}])
    atomic_write_json(path, {"task": job.task, "method": job.row.method,
                             "model": job.model_label, "seed": seed,
                             "metrics": {"non_live_overall": value, "live_overall": 1.0,
                                         "format_rate": 50.0},
                             "num_eval_items": 20, "train": {"steps": 1},
                             "wall_seconds": 10.0, "config": job.seed_config(seed).to_dict(),
                             "versions": {}, "git_commit": prov["commit"],
                             "provenance": prov})


def version(letter):
    return {"commit": letter * 40, "dirty": False, "fingerprint": letter * 16}


def fill(tmp_path, prov_of):
    plan = planning.make_plan(specs.get("table3"), "smoke", None, str(tmp_path))
    for job in plan.jobs:
        for s in job.seeds:
            store(job, s, 10.0 + s, prov_of(job, s))
    return plan


def test_seeds_of_different_code_are_refused_with_both_commits_or_footnoted(tmp_path, capsys):
    fill(tmp_path, lambda job, s: version("b") if job.row.label == "GDPO" and s == 1
         else version("a"))
    args = ["reproduce", "table3", "--render-only", "--results-dir", str(tmp_path),
            "--output-dir", str(tmp_path)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "made by different code" in err and "aaaaaaaaaa" in err and "bbbbbbbbbb" in err
    assert "--allow-mixed-code" in err
    assert cli.main([*args, "--allow-mixed-code"]) == 0
    md = (tmp_path / "tables" / "table3.md").read_text()
    assert "11.00 ± 1.00 †" in md  # GDPO's cells pool both versions
    assert "† GDPO (every cell): pools seeds of 2 code versions (commits aaaaaaaa, " \
           "bbbbbbbb)" in md
    mrtpo = next(line for line in md.splitlines() if line.startswith("| MRTPO |"))
    assert "11.00 ± 1.00" in mrtpo and "†" not in mrtpo  # one version: no footnote
    assert "pools seeds of 2 code versions" in (tmp_path / "tables" / "table3.csv").read_text()


def test_rerun_stale_lists_exactly_the_seeds_other_code_made(tmp_path, capsys):
    here = provenance.current()
    fill(tmp_path, lambda job, s: version("c") if job.row.label == "MRTPO" and s == 2 else here)
    args = ["reproduce", "table3", "--dry-run", "--results-dir", str(tmp_path)]
    assert cli.main(args) == 0
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()
             if line.startswith("  bfcl")}
    assert "stale (other code) [2]" in lines["MRTPO"]
    assert not any("stale" in line for k, line in lines.items() if k != "MRTPO")
    assert cli.main([*args, "--rerun-stale"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("  bfcl")}
    assert "stored seeds [0, 1], to run [2]" in lines["MRTPO"]
    assert "1 run(s) to do" in out


def test_a_resumed_seed_keeps_the_commit_it_started_under(tmp_path, monkeypatch):
    from harness.config import resolve
    from harness.seedrun import SeedRun

    run = SeedRun.of(resolve("smoke", {"results_dir": str(tmp_path / "r"),
                                       "checkpoint_dir": str(tmp_path / "c")}))
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(), threads=None: version("a"))
    assert run.record_start() == version("a")
    assert run.provenance() == version("a")
    (run.checkpoints / "train" / "step-000002").mkdir(parents=True)  # a checkpoint to resume
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(), threads=None: version("b"))
    run.record_start()
    got = run.provenance()
    assert got["commit"] == "a" * 40  # the start's
    assert got["fingerprint"] == "a" * 16 + "+" + "b" * 16  # pools with nothing
    assert got["resumed"] == [version("b")]
    # a resume under the same code keeps the start's fingerprint
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(), threads=None: version("a"))
    run2 = SeedRun.of(resolve("smoke", {"results_dir": str(tmp_path / "r2"),
                                        "checkpoint_dir": str(tmp_path / "c2")}))
    run2.record_start()
    (run2.checkpoints / "train" / "step-000001").mkdir(parents=True)
    run2.record_start()
    assert run2.provenance()["fingerprint"] == "a" * 16
    # without a checkpoint a restart is a new start
    run3 = SeedRun.of(resolve("smoke", {"results_dir": str(tmp_path / "r3"),
                                        "checkpoint_dir": str(tmp_path / "c3")}))
    run3.record_start()
    monkeypatch.setattr(provenance, "current", lambda root=None, plugins=(), threads=None: version("b"))
    run3.record_start()
    assert run3.provenance() == version("b")
    assert json.loads((run3.checkpoints / "provenance.json").read_text()) == version("b")


def test_the_fingerprint_follows_result_sources_and_ignores_reports(tmp_path):
    for rel in ("harness/trainer.py", "lab/reports/render.py", "methods/gdpo.py",
                "tasks/tools/data.json", "common/x.py", "lab/bench/step.py",
                "harness/console/progress.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("v1")
    first = provenance.fingerprint(tmp_path)
    for rel in ("lab/reports/render.py", "lab/bench/step.py", "harness/console/progress.py"):
        (tmp_path / rel).write_text("v2")
    (tmp_path / "harness" / "__pycache__").mkdir()
    (tmp_path / "harness" / "__pycache__" / "trainer.pyc").write_bytes(b"x")
    assert provenance.fingerprint(tmp_path) == first
    for rel in ("methods/gdpo.py", "tasks/tools/data.json"):
        (tmp_path / rel).write_text("v2")
        assert provenance.fingerprint(tmp_path) != first
        (tmp_path / rel).write_text("v1")
    assert provenance.fingerprint(tmp_path) == first


def test_dirty_means_the_result_sources_differ_from_the_commit(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    for rel in ("harness/trainer.py", "lab/reports/render.py", "README.md",
                "results/a/seed0.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("v1")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "one")
    commit, dirty = provenance.commit_state(tmp_path)
    assert len(commit) == 40 and not dirty
    # the README, stored results and the reports change no run's outcome
    for rel in ("README.md", "results/a/seed0.json", "lab/reports/render.py"):
        (tmp_path / rel).write_text("v2")
    (tmp_path / "results" / "a" / "seed1.json").write_text("new")
    assert provenance.commit_state(tmp_path) == (commit, False)
    (tmp_path / "methods").mkdir()
    (tmp_path / "methods" / "new.py").write_text("x")  # a new source, not committed
    assert provenance.commit_state(tmp_path) == (commit, True)
    (tmp_path / "methods" / "new.py").unlink()
    (tmp_path / "harness" / "trainer.py").write_text("v2")  # an edited one
    assert provenance.commit_state(tmp_path) == (commit, True)


def test_a_new_result_records_this_trees_provenance_and_an_old_one_its_commit():
    from harness.config import resolve
    from harness.results import make_record

    record = make_record(resolve("smoke", {}), {}, train={}, wall_seconds=0.0)
    assert record["provenance"]["fingerprint"] == provenance.fingerprint()
    legacy = {"git_commit": "abc-dirty"}
    assert provenance.of_result(legacy) == {"commit": "abc", "dirty": True,
                                             "fingerprint": "commit:abc-dirty"}


def test_the_machine_is_recorded_beside_the_code_and_labelled_by_its_kernels(monkeypatch):
    m = provenance.machine()
    assert set(m) == {"arch", "cpu", "isa", "bf16", "amx", "gpus", "onednn_bf16", "threads"}
    assert isinstance(m["bf16"], bool) and isinstance(m["gpus"], list)
    assert provenance.current()["machine"] == m
    assert provenance.machine_kind({"arch": "x86_64", "isa": "AVX2", "bf16": False,
                                    "amx": False, "gpus": [], "cpu": "AMD EPYC"}) \
        == "x86_64 AVX2, no bf16"
    assert provenance.machine_kind({"arch": "x86_64", "isa": "AVX512", "bf16": True,
                                    "amx": True, "cpu": "Intel Xeon",
                                    "gpus": ["NVIDIA H200", "NVIDIA H200"]}) \
        == "x86_64 AVX512, bf16, AMX + 2 x NVIDIA H200"
    # the CPU's name is not part of the kind: the same instructions run the same kernels
    assert provenance.machine_kind({**m, "cpu": "another"}) == provenance.machine_kind(m)
    assert provenance.machine_kind({"bf16": False, "inferred_from": "62 s a step"}) \
        == "CPU without bf16 kernels, inferred from step times"
    assert provenance.machine_kind(None) is None


def test_a_seed_resumed_on_another_kind_of_machine_names_both():
    a = {**version("a"), "machine": {"arch": "x86_64", "isa": "AVX2", "bf16": False}}
    b = {**version("a"), "machine": {"arch": "x86_64", "isa": "AVX512", "bf16": True}}
    assert provenance.effective(a)["machine"] == a["machine"]
    resumed = provenance.effective({**a, "resumed": [b]})
    assert resumed["fingerprint"] == "a" * 16  # the same code: still poolable
    assert provenance.machine_of_result({"provenance": resumed}) \
        == "x86_64 AVX2, no bf16 then x86_64 AVX512, bf16"
    assert provenance.machine_of_result({"provenance": provenance.effective({**a, "resumed": [a]})}) \
        == "x86_64 AVX2, no bf16"
    assert provenance.machine_of_result({"provenance": version("a")}) is None


def on(kind):
    return {**version("a"), "machine": {"arch": "x86_64", "isa": kind, "bf16": kind != "AVX2"}}


def test_a_cell_or_comparison_spanning_two_machines_is_marked_not_refused(tmp_path):
    # GDPO (the reference) on AVX512, its seed 1 on AVX2; MRTPO all on AVX2; GRPO all AVX512
    fill(tmp_path, lambda job, s: on("AVX2") if job.row.label == "MRTPO" or
         (job.row.label == "GDPO" and s == 1) else on("AVX512"))
    assert cli.main(["reproduce", "table3", "--render-only", "--results-dir", str(tmp_path),
                     "--output-dir", str(tmp_path)]) == 0
    md = (tmp_path / "tables" / "table3.md").read_text()
    assert "Machine: 2 kinds made these seeds" in md
    assert "- x86_64 AVX512, bf16: Base (bfcl); GRPO (bfcl); GDPO (bfcl) seeds 0, 2" in md
    assert "- x86_64 AVX2, no bf16: GDPO (bfcl) seed 1; MRTPO (bfcl)" in md
    assert "seeds made on several kinds of machine: 0, 2 on x86_64 AVX512, bf16; 1 on " \
           "x86_64 AVX2, no bf16" in md  # GDPO's cells
    # MRTPO against GDPO: seeds 0 and 2 pair AVX2 with AVX512 (seed 1 shares AVX2)
    assert "seeds 0, 2 of this row and the reference were made on different machines " \
           "(x86_64 AVX2, no bf16 against x86_64 AVX512, bf16)" in md
    # GRPO against GDPO: seed 1 pairs AVX512 with AVX2; the reference's own note said as its
    assert "† GRPO (every cell): the reference: seeds made on several kinds of machine: 0, 2 " \
           "on x86_64 AVX512, bf16; 1 on x86_64 AVX2, no bf16 / seed 1 of this row and the " \
           "reference were made on different machines (x86_64 AVX512, bf16 against x86_64 " \
           "AVX2, no bf16)" in md
    # one kind everywhere: one line, no marks
    fill(tmp_path, lambda job, s: on("AVX512"))
    assert cli.main(["reproduce", "table3", "--render-only", "--results-dir", str(tmp_path),
                     "--output-dir", str(tmp_path), "--force"]) == 0
    md = (tmp_path / "tables" / "table3.md").read_text()
    assert "Machine: one kind made every seed (x86_64 AVX512, bf16)." in md and "†" not in md
    # none recorded: said once, no marks
    fill(tmp_path, lambda job, s: version("a"))
    assert cli.main(["reproduce", "table3", "--render-only", "--results-dir", str(tmp_path),
                     "--output-dir", str(tmp_path), "--force"]) == 0
    md = (tmp_path / "tables" / "table3.md").read_text()
    assert "Machine: not recorded" in md and "†" not in md


def test_the_thread_count_is_recorded_and_names_the_kind():
    """One torch thread instead of two sums in another order and samples another first
    rollout: the record keeps the run's threads and the kind's label names them, so seeds made
    at two counts are footnoted as two kinds (a record from before shows no count)."""
    import torch

    assert provenance.machine(threads=3)["threads"] == 3
    assert provenance.machine()["threads"] == torch.get_num_threads()
    base = {"arch": "x86_64", "isa": "AVX512", "bf16": True}
    assert provenance.machine_kind({**base, "threads": 1}) == "x86_64 AVX512, bf16, 1 thread"
    assert provenance.machine_kind({**base, "threads": 2}) == "x86_64 AVX512, bf16, 2 threads"
    assert provenance.machine_kind(base) == "x86_64 AVX512, bf16"
