"""The Python entry point (harness.api): the CLI's run, callable from a notebook."""
import pytest

from harness import api
from harness.preflight import PreflightError
from harness.results import atomic_write_json, make_record, result_path


def test_config_resolves_fields_like_the_cli_flags(tmp_path):
    c = api.config(method="mrtpo", task="bfcl", group_size=8, results_dir=str(tmp_path))
    assert (c.method.method, c.task.task, c.rollout.group_size, c.preset) == \
        ("mrtpo", "bfcl", 8, "smoke")
    assert c.results_dir == str(tmp_path.resolve())
    with pytest.raises(ValueError, match="unknown config field 'group_sizee'"):
        api.config(method="gdpo", task="bfcl", group_sizee=8)


@pytest.mark.model
def test_run_returns_the_stored_results_without_starting_ray(tmp_path, monkeypatch):
    import ray
    from dataclasses import replace

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    c = api.config(method="gdpo", task="bfcl", results_dir=str(tmp_path))
    for seed, value in ((0, 10.0), (1, 30.0)):
        seeded = replace(c, seed=seed)
        atomic_write_json(result_path(seeded), make_record(
            seeded, {"non_live_overall": value}, train={}, wall_seconds=1.0))
    results = api.run(method="gdpo", task="bfcl", seeds=2, results_dir=str(tmp_path))
    assert [r["metrics"]["non_live_overall"] for r in results] == [10.0, 30.0]
    assert [r["seed"] for r in api.run("gdpo", "bfcl", seeds=[1], results_dir=str(tmp_path))] \
        == [1]


def test_run_checks_everything_before_any_work(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(PreflightError) as err:
        api.run(method="grpo", task="bfcl", replay="joint", eval_limit=-1,
                results_dir=str(tmp_path / "runs"))
    assert len(err.value.problems) == 2 and not (tmp_path / "runs").exists()
    with pytest.raises(ValueError, match="give a count >= 1"):
        api.run(method="gdpo", task="bfcl", seeds=0)
