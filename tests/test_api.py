"""The Python entry point (harness.api): the CLI's run, callable from a notebook."""
from pathlib import Path

import pytest

from harness import api
from harness.preflight import PreflightError
from harness.results import atomic_write_json, make_record, result_path


def test_config_resolves_fields_like_the_cli_flags(tmp_path):
    c = api.config(method="mrtpo", task="bfcl", group_size=8, results_dir=str(tmp_path))
    assert (c.method.method, c.task.task, c.rollout.group_size, c.preset) == \
        ("mrtpo", "bfcl", 8, "smoke")
    assert c.results_dir == str(tmp_path.resolve())
    with pytest.raises(ValueError, match="unknown setting 'group_sizee'; did you mean "
                                         "'group_size'"):
        api.config(method="gdpo", task="bfcl", group_sizee=8)
    # TRL's names are the same fields
    trl = api.config(method="gdpo", task="bfcl", num_generations=8, learning_rate=2e-6,
                     results_dir=str(tmp_path))
    assert (trl.rollout.group_size, trl.training.lr) == (8, 2e-6)


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
    # each result says where its files are; the folder's name is its setting
    files = results[1]["files"]
    assert files["result"] == str(result_path(replace(c, seed=1)))
    assert files["train_log"].endswith("seed1.train.jsonl") and \
        files["predictions"].endswith("seed1.predictions.jsonl")
    assert results[1]["setting"] == "smoke" == Path(files["folder"]).name
    # one call loads them (and their per-step rows) into pandas
    Path(files["train_log"]).write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.25}\n')
    seeds, steps = api.load(tmp_path)
    assert sorted(seeds["seed"]) == [0, 1] and set(seeds["method"]) == {"gdpo"}
    assert seeds.set_index("seed").loc[1, "non_live_overall"] == 30.0
    assert list(steps["loss"]) == [0.5, 0.25] and set(steps["seed"]) == {1}
    assert [r["seed"] for r in api.run("gdpo", "bfcl", seeds=[1], results_dir=str(tmp_path))] \
        == [1]


def test_run_checks_everything_before_any_work(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(PreflightError) as err:
        api.run(method="grpo", task="bfcl", mrtpo_replay="joint", eval_limit=-1,
                results_dir=str(tmp_path / "runs"))
    assert len(err.value.problems) == 2 and not (tmp_path / "runs").exists()
    with pytest.raises(ValueError, match="give a count >= 1"):
        api.run(method="gdpo", task="bfcl", seeds=0)


def test_the_readmes_plugin_example_weights_the_format_reward_by_half():
    """docs/examples/half_format.py, shown whole in the README: with whitening off, its
    advantage is GDPO's sum of per-reward advantages with the format term halved."""
    from pathlib import Path

    import torch

    import methods
    from harness.plugins import load_plugins
    from methods.batch import RolloutBatch

    load_plugins((str(Path(__file__).parents[1] / "docs" / "examples" / "half_format.py"),))
    rewards = torch.tensor([[1.0, 0.2], [0.0, 0.9], [1.0, 0.4], [0.0, 0.1]])

    def batch(cols, names):
        return RolloutBatch(rewards=rewards[:, cols], reward_names=names,
                            reward_bounds=((0.0, 1.0),) * len(names),
                            group=torch.tensor([0, 0, 1, 1]),
                            response_mask=torch.ones(4, 3))

    both = batch([0, 1], ("format", "correct"))
    half = methods.advantages("half-format", both, whiten="none")
    full = methods.advantages("gdpo", both, whiten="none")
    fmt = methods.advantages("gdpo", batch([0], ("format",)), whiten="none")
    assert torch.allclose(half, full - 0.5 * fmt)
    assert not torch.allclose(half, full)
