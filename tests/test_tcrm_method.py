"""The TCRM method: its token weights and allocation on hand-computed numbers, its reductions
(beta = 0 is GDPO), the value model trained online (its objective's scaling, its credit, its
state across a checkpoint) and a saved one read by P2T's reward-model variant."""
import pickle

import pytest
import torch

import methods
from harness.models import load_model, load_tokenizer
from harness.replay import PolicyContext
from methods import RolloutBatch
from methods.tcrm import PASS, online, token_weights
from methods.tcrm import model as vm
from tasks.base import Example


def test_token_weights_by_hand():
    credit = torch.tensor([[[0.2, -0.1, 0.3, 0.0]]])
    mask = torch.ones(1, 4, dtype=torch.long)
    # aligned, A > 0: x = [0.2, 0, 0.3, 0], mean 0.125, rho = [1.6, 0, 2.4, 0]
    w = token_weights(credit, torch.tensor([[1.5]]), mask, 0.5, "aligned")
    assert torch.allclose(w, torch.tensor([[[1.3, 0.5, 1.7, 0.5]]]), atol=1e-6)
    # aligned, A < 0: x = [0, 0.1, 0, 0]: the token that lowered the expected outcome
    w = token_weights(credit, torch.tensor([[-0.7]]), mask, 0.5, "aligned")
    assert torch.allclose(w, torch.tensor([[[0.5, 2.5, 0.5, 0.5]]]), atol=1e-6)
    # abs: x = [0.2, 0.1, 0.3, 0], mean 0.15
    w = token_weights(credit, torch.tensor([[-0.7]]), mask, 0.5, "abs")
    assert torch.allclose(w, torch.tensor([[[1 / 6 * 7, 5 / 6, 1.5, 0.5]]]), atol=1e-5)
    # nothing aligned (or A = 0): GDPO's uniform weights; padding 0
    w = token_weights(torch.tensor([[[-0.2, -0.1, 0.0]]]), torch.tensor([[2.0]]),
                      torch.tensor([[1, 1, 0]]), 0.5, "aligned")
    assert w.tolist() == [[[1.0, 1.0, 0.0]]]


def _batch(credit):
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0]])
    return RolloutBatch(rewards=r, reward_names=("a", "b"), reward_bounds=((0, 1), (0, 1)),
                        group=torch.zeros(4, dtype=torch.long), response_mask=mask,
                        passes={PASS: credit})


def test_allocation_by_hand_and_beta_zero_is_gdpo():
    g = torch.Generator().manual_seed(0)
    credit = torch.randn(4, 2, 3, generator=g)
    batch = _batch(credit)
    gdpo = methods.advantages("gdpo", batch)
    assert torch.allclose(methods.advantages("tcrm", batch, tcrm_beta=0.0), gdpo, atol=1e-6)
    assert not torch.allclose(methods.advantages("tcrm", batch), gdpo, atol=1e-3)
    # before whitening: S = sum_k w_k * contrib_k, by hand from the per-reward advantages
    from methods.compose import ALLOCATIONS, NORMALISERS, reward_advantages

    opts = methods.options()
    norm = NORMALISERS.get("gdpo")(batch, reward_advantages(batch, opts), None, None, opts)
    scores, metrics = ALLOCATIONS.get("tcrm")(batch, norm, opts)
    mask = batch.response_mask
    want = torch.zeros(4, 3)
    for n in range(4):
        for k in range(2):
            a = float(norm.contrib[n, k])
            x = [max(0.0, (1 if a > 0 else -1 if a < 0 else 0) * float(c))
                 for c, m in zip(credit[n, k], mask[n]) if m]
            mean = sum(x) / len(x)
            for t, xt in enumerate(x):
                rho = xt / (mean + 1e-8) if mean > 0 else 1.0
                want[n, t] += (0.5 + 0.5 * rho) * a
    assert torch.allclose(scores, want, atol=1e-5)
    assert 0 < metrics["alloc/kept"] <= 1


def test_objective_sums_each_response_tokens_as_the_paper():
    # one reward, two responses of one prompt, values [m, 1, T + 1] (column 0: the prompt)
    v = torch.tensor([[[0.0, 1.0, 3.0]], [[0.0, 2.0, 0.0]]], requires_grad=True)
    mask1 = torch.tensor([[1, 1, 1], [1, 1, 0]])
    data = online.Rollouts([[1], [1]], torch.zeros(2, 2, dtype=torch.long),
                           mask1[:, 1:], torch.tensor([[1.0], [0.0]]), torch.zeros(2))
    loss, parts = online.objective(v, mask1, data, look=0.5, smooth=0.25)
    # BT: finals 3.0 vs 2.0 -> softplus(-1); lookahead sums per response: (0-3)^2 + (1-3)^2 =
    # 13 and (0-2)^2 = 4 -> mean 8.5; smoothness: (0-1)^2 + (1-3)^2 = 5 and (0-2)^2 = 4 -> 4.5
    bt = torch.nn.functional.softplus(torch.tensor(-1.0)).item()
    assert parts["bt"] == pytest.approx(bt)
    assert parts["lookahead"] == pytest.approx(8.5)
    assert parts["smoothness"] == pytest.approx(4.5)
    assert loss.item() == pytest.approx(bt + 0.5 * 8.5 + 0.25 * 4.5)
    # an absent reward (NaN) trains nothing
    absent = online.Rollouts(data.prompts, data.response_ids, data.response_mask,
                             torch.tensor([[float("nan")], [float("nan")]]), data.group)
    assert online.objective(v, mask1, absent, 0.5, 0.25)[0].item() == 0.0


def test_pair_accuracy_at_final_and_middle_tokens():
    # responses of 3 and 2 tokens: middle tokens are their 2nd and 1st (columns 2 and 1)
    v = torch.tensor([[[0.0, 0.1, 0.9, 0.2]], [[0.0, 0.5, 0.4, 0.0]]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    data = online.Rollouts([[1], [1]], torch.zeros(2, 3, dtype=torch.long), mask,
                           torch.tensor([[1.0], [0.0]]), torch.zeros(2))
    got = online.pair_accuracy(v, data)
    assert got == {"pairs": 1, "acc_final": 0.0, "acc_middle": 1.0}


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random", seed=3), load_tokenizer("tiny-random")


def _context(model, tok, n_prompts=2, g=4, width=6, seed=0):
    """Responses whose reward 'a' is 1 exactly when their second token is 7."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(20, 300, (n_prompts * g, width), generator=gen)
    ids[::2, 1] = 7
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    rewards = (ids[:, 1] == 7).float()[:, None]
    examples = [Example(id=f"p{i // g}", messages=({"role": "user", "content": f"q{i // g}"},),
                        reference=None) for i in range(n_prompts * g)]
    ctx = PolicyContext.of(model, tok, examples, ids, mask, ["a"], rewards=rewards,
                           batch_size=8, initial=model)
    ctx.group = torch.arange(n_prompts * g) // g
    return ctx


@pytest.mark.model
def test_value_model_trains_online_and_its_credit_sums_to_the_change(tiny):
    model, tok = tiny
    ctx = _context(model, tok)
    opts = methods.options(tcrm_epochs=8, tcrm_lr=3e-3)
    credit = methods.get("tcrm").passes[0].run(ctx, opts)
    state = ctx.state[PASS]
    assert credit.shape == (8, 1, 6)
    data = state.buffer[-1]
    v = online.predict(state.model, data, 8, tok.pad_token_id)
    lengths = ctx.response_mask.sum(dim=1)
    for i in range(8):
        assert credit[i, 0].sum().item() == pytest.approx(
            (v[i, 0, int(lengths[i])] - v[i, 0, 0]).item(), abs=1e-4)
        assert (credit[i, 0, int(lengths[i]):] == 0).all()
    # trained on outcomes: the preferred responses' final values are above the others'
    assert online.pair_accuracy(v, data)["acc_final"] == 1.0
    # logged: the pairs' accuracy before training on them (2 prompts x 2 x 2 pairs)
    assert state.metrics["heldout_pairs"] == 8 and 0 <= state.metrics["heldout_acc_middle"] <= 1
    assert state.metrics["bt"] < 0.69  # below chance's log 2 after training
    # the policy is untouched and only the top blocks and heads trained
    assert vm.describe(state.model)["trained"] < vm.describe(state.model)["params"]


@pytest.mark.model
def test_state_survives_a_checkpoint_and_continues_identically(tiny):
    model, tok = tiny
    opts = methods.options(tcrm_epochs=1, tcrm_lr=1e-3, tcrm_buffer=2)
    run = methods.get("tcrm").passes[0].run
    ctx = _context(model, tok)
    run(ctx, opts)
    saved = pickle.dumps(ctx.state)
    ctx2 = _context(model, tok, seed=1)
    ctx2.state = ctx.state
    straight = run(ctx2, opts)
    resumed = _context(model, tok, seed=1)
    resumed.state = pickle.loads(saved)
    assert resumed.state[PASS].model is None  # only the trained part was kept
    again = run(resumed, opts)
    assert torch.equal(straight, again)
    a = dict(ctx.state[PASS].model.named_parameters())
    for name, p in resumed.state[PASS].model.named_parameters():
        assert torch.equal(p, a[name]), name


@pytest.mark.model
def test_saved_value_model_is_read_by_tcrm_and_by_p2t(tmp_path, tiny):
    model, tok = tiny
    out = str(tmp_path / "vm")
    opts = methods.options(tcrm_epochs=2, tcrm_lr=3e-3, tcrm_save=out)
    ctx = _context(model, tok)
    credit = methods.get("tcrm").passes[0].run(ctx, opts)
    # read back as the value model, untrained: the same credit
    again = _context(model, tok)
    reread = methods.get("tcrm").passes[0].run(
        again, methods.options(tcrm_model=out, tcrm_epochs=0))
    assert torch.allclose(reread, credit, atol=1e-5)
    # P2T's reward-model variant reads it (the head named by --p2t-reward-label)
    from methods.p2t import reward_model

    with pytest.raises(ValueError, match="--p2t-reward-label"):
        reward_model.label_column(reward_model.load(out)[0].config, "nope", out)
    rows = reward_model.token_rewards(ctx, methods.options(p2t_reward_model=out,
                                                           p2t_reward_label="a"))
    valid = ctx.response_mask.bool()
    assert ((rows[:, 0][valid] > 0) & (rows[:, 0][valid] < 1)).all()
    # its reward is the head's final value through a sigmoid: it differs between responses
    finals = {round(float(rows[i, 0, 0]), 5) for i in range(8)}
    assert len(finals) > 1
    # a model of two rewards needs the label named
    config = reward_model.load(out)[0].config
    config.tcrm_rewards = ["a", "b"]
    with pytest.raises(ValueError, match="name the one P2T reads"):
        reward_model.label_column(config, None, out)
    config.tcrm_rewards = ["a"]
    # the same checks read from the folder before any model loads (the run's one check)
    assert any("--p2t-reward-label 'nope'" in p for p in methods.get("p2t").problems(
        methods.options(p2t_reward_model=out, p2t_reward_label="nope")))
    assert methods.get("p2t").problems(methods.options(p2t_reward_model=out,
                                                       p2t_reward_label="a")) == []


def test_options_are_checked():
    problems = methods.get("tcrm").problems(methods.options(tcrm_beta=2.0,
                                                            tcrm_profile="x",
                                                            tcrm_model="/nowhere"))
    text = " ".join(problems)
    assert "tcrm_beta" in text and "tcrm_profile" in text and "/nowhere" in text


@pytest.mark.model
def test_frozen_blocks_run_once_and_give_the_whole_model_values(tiny):
    model, tok = tiny
    ctx = _context(model, tok)
    vmodel = vm.from_policy(model, ["a"], seed=0)
    vm.train_layers(vmodel, 1)
    assert vm.frozen_blocks(vmodel, 1) == 1 and vm.frozen_blocks(vmodel, -1) == 0
    data = online.Rollouts(online.render_prompts(tok, ctx.examples), ctx.response_ids,
                           ctx.response_mask, ctx.rewards, ctx.group)
    whole = online.predict(vmodel, data, 3, tok.pad_token_id)
    split = online.predict(vmodel, data, 3, tok.pad_token_id, frozen=1)
    assert data.states is not None  # kept for the next reads
    assert torch.allclose(whole, split, atol=1e-5)
    # with gradient: only the top block and the heads receive it
    v = vm.values(vmodel, data.prompts[:2], data.response_ids[:2], data.response_mask[:2],
                  tok.pad_token_id, 1, data.states[:2])
    v.sum().backward()
    grads = {n: p.grad is not None for n, p in vmodel.named_parameters()}
    assert grads["score.weight"] and grads["model.layers.1.mlp.up_proj.weight"]
    assert not grads["model.layers.0.mlp.up_proj.weight"]
    # the policy's body was copied, not shared
    assert vmodel.base_model.layers[0].mlp.up_proj.weight.data_ptr() != \
        model.base_model.layers[0].mlp.up_proj.weight.data_ptr()


@pytest.mark.slow
def test_tcrm_trains_in_the_loop_and_a_checkpoint_resumes_its_value_model(tmp_path):
    """In process on the toy task: a step's advantages carry the value model's credit, and a
    trainer restored from a checkpoint after step 0 computes step 1 exactly as the one that
    went on (the value model, its optimizer and buffer came back with the checkpoint)."""
    from pathlib import Path

    from harness import engine as eng
    from harness.checkpoints import state
    from harness.config import resolve
    from harness.trainer import Trainer

    eng.init_single_process()
    toy = str(Path(__file__).parent / "plugins" / "toy_task.py")
    config = resolve("smoke", {
        "model": "tiny-random", "method": "tcrm", "task": "toy", "plugins": (toy,),
        "steps": 2, "prompts_per_step": 2, "group_size": 4, "max_response_tokens": 12,
        "eval_max_response_tokens": 8, "eval_limit": 2, "results_dir": str(tmp_path),
        "max_prompt_tokens": 4096, "lr": 1e-2, "tcrm_train_layers": 1, "tcrm_buffer": 2,
        "tcrm_save": str(tmp_path / "vm")})
    first = Trainer(config)
    data, metrics = first.collect(0)
    metrics.update(first.update(data))
    assert torch.isfinite(data.advantages).all() and metrics["tcrm/time"] > 0
    assert (data.advantages != 0).any() and metrics["grad_norm"] > 0
    assert {"tcrm/bt", "tcrm/lookahead", "tcrm/smoothness"} <= set(metrics)
    state.save(tmp_path / "ck", first, 1, [])
    went_on, _ = first.collect(1)
    second = Trainer(config)
    state.load(tmp_path / "ck", second)
    assert second.pass_state[PASS].model is None  # rebuilt at its first use
    resumed, _ = second.collect(1)
    assert (went_on.advantages != 0).any()
    assert torch.equal(went_on.advantages, resumed.advantages)
    assert len(second.pass_state[PASS].buffer) == 2
    # the value model the run saved is another run's P2T reward model (one head named)
    p2t = Trainer(resolve("smoke", {"model": "tiny-random", "method": "p2t", "task": "toy", "plugins": (toy,),
                                    "steps": 1, "prompts_per_step": 2, "group_size": 4,
                                    "max_response_tokens": 12, "max_prompt_tokens": 4096,
                                    "results_dir": str(tmp_path),
                                    "p2t_reward_model": str(tmp_path / "vm"),
                                    "p2t_reward_label": "parity"}))
    data, metrics = p2t.collect(0)
    assert 0 < metrics["p2t/step_reward"] < 1 and torch.isfinite(data.advantages).all()
