"""Impossible settings fail before Ray starts, every problem named with its fix."""
import pytest

from harness import checks
from harness import config as cfg
from harness.launch import validate
from harness.run import of_config
from tasks.base import Example


def run_of(preset: str = "smoke", **overrides):
    return of_config(cfg.resolve(preset, overrides))


def problems(**overrides) -> list[str]:
    return checks.settings_problems(run_of(**overrides))


def test_the_presets_that_run_here_have_no_problems():
    for preset in ("smoke", "smoke-learn", "smoke-learn-30"):
        for method in ("grpo", "gdpo", "mrtpo", "mrtpo+saw", "opsd", "cort"):
            assert checks.settings_problems(run_of(preset, method=method)) == []


@pytest.mark.parametrize("overrides, expected", [
    ({"group_size": 1, "method": "gdpo"}, "--group-size 2 or more"),
    ({"group_size": 1, "method": "mrtpo+saw"}, "a group of 1 response has no spread"),
    ({"mrtpo_beta": 1.5, "method": "mrtpo"}, "mrtpo_beta is 1.5, outside [0, 1]"),
    ({"mrtpo_beta": -0.1, "method": "mrtpo+saw"}, "--mrtpo-beta within it"),
    ({"prompts_per_step": 3, "workers": 2}, "use --prompts-per-step 4 or --workers"),
    ({"ppo_mini_batches": 3}, "cannot be split into 3 equal mini-batches"),
    ({"loss_agg": "sum"}, "unknown loss_agg 'sum'"),
    ({"kl_type": "k9"}, "unknown kl_type 'k9'"),
    ({"top_p": 0.0}, "top_p is 0.0"),
    ({"temperature": 0.0}, "positive --temperature"),
    ({"zero_stage": 4}, "use 0, 1, 2 or 3"),
    ({"dtype": "int8"}, "unknown dtype 'int8'"),
    ({"opsd_beta": 2.0, "method": "opsd"}, "opsd_beta is 2.0"),
    ({"gd2po_tau": 1.5, "method": "saw+gd2po"}, "gd2po_tau is 1.5"),
    ({"replay_chunk": 0, "method": "mrtpo"}, "replay_chunk is 0"),
    # the loss needs both distributions in the mixture: the same rule as the options object's
    ({"opsd_beta": 1.0, "method": "opsd+grpo"}, "opsd_beta is 1.0, outside (0, 1)"),
])
def test_each_impossible_setting_is_named_with_its_fix(overrides, expected):
    found = problems(**overrides)
    assert any(expected in p for p in found), found


def test_opsd_alone_needs_no_group():
    # OPSD alone has no reward term: it distils per token, a group of one is fine
    assert problems(group_size=1, method="opsd") == []
    assert problems(group_size=1, method="gdpo+opsd") != []


def test_every_problem_is_listed_at_once():
    from harness import preflight
    from harness.run import of_config

    with pytest.raises(ValueError) as err:
        preflight.check(of_config(cfg.resolve("smoke", {"group_size": 1, "mrtpo_beta": 3.0,
                                                         "method": "mrtpo"})))
    text = str(err.value)
    assert "group of 1" in text and "mrtpo_beta is 3.0" in text


def test_gpu_settings_on_a_machine_without_cuda():
    import torch

    found = problems(use_gpu=True)
    if torch.cuda.is_available():
        assert found == []
    else:
        assert any("no CUDA device" in p and "--no-use-gpu" in p for p in found)


def test_replay_needs_verifier_information_on_the_examples():
    config = cfg.resolve("smoke", {"method": "mrtpo"})
    bare = [Example(id="x-0", messages=({"role": "user", "content": "hi"},), reference="")]
    found = checks.verifier_info_problems(of_config(config), bare)
    assert found and "carry none" in found[0] and "'x-0'" in found[0]
    assert checks.verifier_info_problems(run_of(method="gdpo"), bare) == []
    # VERPO's evidence is the group's own responses: it needs no verifier information
    assert checks.verifier_info_problems(run_of(method="verpo"), bare) == []
    opsd = checks.verifier_info_problems(run_of(method="opsd+grpo"), bare)
    assert opsd and "(opsd)" in opsd[0]
    # P2T reads it without a reward model, and not with one
    p2t = checks.verifier_info_problems(run_of(method="p2t"), bare)
    assert p2t and "(attribution)" in p2t[0]
    with_rm = cfg.resolve("smoke", {"method": "p2t", "p2t_reward_model": "prm"})
    assert checks.verifier_info_problems(of_config(with_rm), bare) == []


@pytest.mark.model
def test_validate_fails_before_anything_starts(monkeypatch):
    import harness.backend as backend

    monkeypatch.setattr(backend, "start_ray", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(ValueError, match="group of 1"):
        validate(of_config(cfg.resolve("smoke", {"group_size": 1})))


@pytest.mark.model
def test_a_trainer_built_in_process_checks_with_its_actual_world_size():
    # no launcher validated this config: the trainer checks it with the process group's size
    # (1 here), before loading any model
    from harness.trainer import Trainer

    with pytest.raises(ValueError, match="cannot be split into 3 equal mini-batches"):
        Trainer(cfg.resolve("smoke", {"ppo_mini_batches": 3}))
    assert checks.settings_problems(run_of(prompts_per_step=3, workers=2), world=1) == []
    assert checks.local_responses(run_of(), world=2) == 4
