"""The sequence-level methods as verl advantage estimators (harness/integrations/verl.py), in
verl's own environment (`bash scripts/test.sh --verl`): through verl's registry and a DataProto
laid out as its trainer makes one, each method's advantages equal the harness's own on the
same rewards; the harness's GDPO and GRPO equal verl's own estimators."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl", reason="verl runs in its own environment: bash scripts/test.sh "
                                   "--verl")
import numpy as np  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

import methods  # noqa: E402
from harness.integrations import verl as adapter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "docs" / "examples" / "half_format.py"  # a plugin method: a reward weighting
KEYS = ("format", "correct", "exec")
B, T, P, G = 16, 7, 3, 4


def _rows(seed=0, absent=False):
    """verl's rows: interleaved prompt groups (uid), ragged responses, three 0/1 rewards (one
    absent for some rows when ``absent``); and the same as the harness's group tensor."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 2, (B, len(KEYS)), generator=g).float()
    rewards[:, 2] = torch.rand(B, generator=g)  # a graded reward
    if absent:
        rewards[::5, 1] = float("nan")
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    group = torch.tensor([i % (B // G) for i in range(B)])  # rows of one prompt not adjacent
    uid = np.array([f"prompt-{int(k)}" for k in group], dtype=object)
    return rewards, mask, group, uid


def _data(rewards, mask, uid):
    cols = {k: np.array([None if v != v else float(v) for v in rewards[:, i].tolist()],
                        dtype=object) for i, k in enumerate(KEYS)}
    return DataProto.from_dict(
        tensors={"token_level_rewards": torch.zeros_like(mask), "response_mask": mask.clone(),
                 "prompts": torch.zeros(B, P, dtype=torch.long),
                 "attention_mask": torch.cat([torch.ones(B, P), mask], 1).long()},
        non_tensors={"uid": uid, **cols})


def _harness(name, rewards, mask, group, opts=None):
    return methods.compute(name, methods.RolloutBatch(
        rewards=rewards, reward_names=KEYS, reward_bounds=((0, 1),) * len(KEYS), group=group,
        response_mask=mask.long()), opts or methods.options()).scores * mask


def _sequence_level():
    from harness.plugins import load_plugins

    load_plugins([str(PLUGIN)])
    out = []
    for name in list(methods.METHODS.names()) + ["gdpo+saw"]:
        m = methods.get(name)
        if not (m.passes or m.loss_terms or not m.pg_term):
            out.append(name)
    return out


@pytest.mark.parametrize("absent", [False, True])
def test_estimators_equal_the_harness_for_every_sequence_level_method(absent):
    names = _sequence_level()
    assert {"grpo", "gdpo", "saw", "dara", "dvao", "sa-mrpo", "gd2po", "gdpo+saw",
            "half-format"} <= set(names)
    rewards, mask, group, uid = _rows(1, absent)
    for name in names:
        est = adapter.register(name, KEYS)
        assert est == f"harness:{name}" and est in core_algos.ADV_ESTIMATOR_REGISTRY
        out = adapter.compute_advantage(_data(rewards, mask, uid), est,
                                        config=AlgoConfig(adv_estimator=est))
        adv = out.batch["advantages"]
        want = _harness(name, rewards, mask, group)
        assert adv.shape == (B, T), name
        assert torch.allclose(adv, want, atol=1e-6), name
        assert torch.equal(out.batch["returns"], adv), name


def test_a_reward_or_a_group_dropped_changes_the_advantages():
    """The equality above is informative: the harness's numbers move when a reward or the
    grouping does."""
    rewards, mask, group, uid = _rows(2)
    full = _harness("gdpo", rewards, mask, group)
    two = methods.compute("gdpo", methods.RolloutBatch(
        rewards=rewards[:, :2], reward_names=KEYS[:2], reward_bounds=((0, 1),) * 2,
        group=group, response_mask=mask.long()), methods.options()).scores * mask
    adjacent = _harness("gdpo", rewards, mask, torch.arange(B) // G)
    assert not torch.allclose(full, two, atol=1e-3)
    assert not torch.allclose(full, adjacent, atol=1e-3)


def test_the_harness_gdpo_is_verl_s_own_gdpo():
    """verl's built-in GDPO (per-key GRPO, sum, token whitening) and the harness's under its
    default ``--conventions verl``: the same numbers, an absent reward included."""
    rewards, mask, group, uid = _rows(3)
    cfg = AlgoConfig(adv_estimator="gdpo", gdpo_reward_keys=list(KEYS))
    theirs = adapter.compute_advantage(_data(rewards, mask, uid), "gdpo", config=cfg)
    ours = _harness("gdpo", rewards, mask, group)
    assert torch.allclose(theirs.batch["advantages"], ours, atol=1e-5)


def test_the_harness_grpo_is_verl_s_own_grpo_without_whitening():
    """verl's GRPO normalises the summed reward in its group and does not whiten the batch;
    the harness's GRPO with ``whiten='none'`` is the same."""
    rewards, mask, group, uid = _rows(4)
    data = _data(rewards, mask, uid)
    last = (mask.sum(dim=1) - 1).long()
    tlr = torch.zeros_like(mask)
    tlr[torch.arange(B), last] = rewards.sum(dim=1)
    data.batch["token_level_rewards"] = tlr
    theirs = adapter.compute_advantage(data, "grpo", config=AlgoConfig(adv_estimator="grpo"))
    ours = _harness("grpo", rewards, mask, group, methods.options(whiten="none"))
    assert torch.allclose(theirs.batch["advantages"], ours, atol=1e-5)


def test_token_level_methods_and_loss_terms_are_refused_with_the_reason():
    for name, what in (("mrtpo", "replay"), ("p2t", "attribution"), ("tcrm", "value"),
                       ("opsd", "teacher")):
        with pytest.raises(ValueError, match=f"needs {what}.*no model"):
            adapter.register(name, KEYS)
    with pytest.raises(Exception, match="unknown method 'mrtpo-x'. Did you mean 'mrtpo'"):
        adapter.register("mrtpo-x", KEYS)


def test_verl_s_own_compute_advantage_says_what_is_missing():
    """verl 0.9.1 passes per-reward scores to its 'gdpo' estimator only: the estimator says
    so, and which function to call, instead of computing something else."""
    from verl.trainer.ppo import ray_trainer

    est = adapter.register("saw", KEYS)
    rewards, mask, _, uid = _rows(5)
    with pytest.raises(ValueError, match="passes non_tensor_batch to one of its own"):
        ray_trainer.compute_advantage(_data(rewards, mask, uid), est,
                                      config=AlgoConfig(adv_estimator=est))
    data = _data(rewards, mask, uid)
    data.non_tensor_batch.pop("exec")
    with pytest.raises(KeyError, match=r"\['exec'\] are not in"):
        adapter.compute_advantage(data, est, config=AlgoConfig(adv_estimator=est))
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo=False"):
        adapter.compute_advantage(_data(rewards, mask, uid), est, norm_adv_by_std_in_grpo=False,
                                  config=AlgoConfig(adv_estimator=est))


def test_verl_s_gdpo_reward_weights_are_refused_not_ignored():
    """verl's algorithm.gdpo_reward_weights weight its own gdpo; a harness estimator replaces
    that, so weights other than 1 are refused (unit weights change nothing and pass)."""
    est = adapter.register("gdpo", KEYS)
    rewards, mask, group, uid = _rows(6)
    with pytest.raises(ValueError, match=r"gdpo_reward_weights=\[2.0, 1.0, 1.0\]"):
        adapter.compute_advantage(_data(rewards, mask, uid), est, config=AlgoConfig(
            adv_estimator=est, gdpo_reward_weights=[2.0, 1.0, 1.0]))
    data = adapter.compute_advantage(_data(rewards, mask, uid), est, config=AlgoConfig(
        adv_estimator=est, gdpo_reward_weights=[1.0, 1.0, 1.0]))
    assert torch.allclose(data.batch["advantages"], _harness("gdpo", rewards, mask, group),
                          atol=1e-6)


def test_the_documented_example_runs_as_written():
    out = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "verl_saw.py")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.strip().startswith("saw")]
    assert len(lines) == 8
    adv = [float(ln.split("advantage")[1].split()[0]) for ln in lines]
    assert adv[0] > 0 > adv[3]  # both rewards vs neither, in the first prompt's group


@pytest.mark.slow
def test_the_task_runner_registers_the_method_inside_verl_s_actor():
    """verl trains inside its TaskRunner Ray actor: the method must be registered and
    compute_advantage routed there (a registration on the driver is absent in the actor)."""
    import ray

    from verl.trainer.ppo import ray_trainer

    runner_class = adapter.task_runner("saw", KEYS)
    with pytest.raises(ValueError, match="needs replay"):
        adapter.task_runner("mrtpo", KEYS)  # refused on the driver, before verl starts
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        runner = runner_class.remote()

        def state(_):
            from harness.integrations import verl as inside
            from verl.trainer.ppo import core_algos, ray_trainer as rt
            return ("harness:saw" in core_algos.ADV_ESTIMATOR_REGISTRY,
                    rt.compute_advantage is inside.compute_advantage)

        assert ray.get(runner.__ray_call__.remote(state)) == (False, False)
        assert ray.get(runner.prepare.remote()) == "harness:saw"
        assert ray.get(runner.__ray_call__.remote(state)) == (True, True)
    finally:
        ray.shutdown()
    assert ray_trainer.compute_advantage is not adapter.compute_advantage  # the driver's own
