"""P2T: the weights and the allocation on hand-computed numbers, the one-backward estimator
against finite differences and exact token replacement, and the reward-model variant."""
import math

import pytest
import torch

import methods
from harness.models import load_model, load_tokenizer
from harness.replay import PolicyContext
from methods import RolloutBatch
from methods.p2t import P2tOptions, step_weights, verifier_influence
from tasks.base import Example, VerifierInfo


# --- weights and allocation ----------------------------------------------------------------
def test_step_weights_hand_computed():
    # I = [0, ln 2, ln 4] (tau 1) -> softmax [1, 2, 4] / 7; N = 3 valid tokens (the 4th is
    # padding): N softmax = [3, 6, 12] / 7; alpha 1, omega 0.6 -> (1 + 0.6 N softmax) / 1.6
    infl = torch.tensor([[[0.0, math.log(2), math.log(4), 9.0]], [[float("nan")] * 4]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    w = step_weights(infl, mask, 1.0, 1.0, 0.6)
    expected = [(1 + 0.6 * 3 / 7) / 1.6, (1 + 0.6 * 6 / 7) / 1.6, (1 + 0.6 * 12 / 7) / 1.6, 0]
    assert torch.allclose(w[0, 0], torch.tensor(expected), atol=1e-6)
    assert w[0, 0, :3].mean().item() == pytest.approx(1.0)
    assert w[1, 0].tolist() == [1.0, 1.0, 0.0, 0.0]  # not computed: uniform (GDPO)
    # temperature 2 halves the logits: softmax of [0, ln 2 / 2, ln 4 / 2] = [1, 1.414, 2] / 4.414
    w2 = step_weights(infl, mask, 2.0, 0.0, 1.0)
    s = 1 + math.sqrt(2) + 2
    assert torch.allclose(w2[0, 0, :3], torch.tensor([3 / s, 3 * math.sqrt(2) / s, 6 / s]),
                          atol=1e-6)


def _batch(influence, rewards, group, mask):
    return RolloutBatch(rewards=torch.tensor(rewards), reward_names=("a", "b"),
                        reward_bounds=((0.0, 1.0),) * 2, group=torch.tensor(group),
                        response_mask=torch.tensor(mask), passes={"attribution": influence},
                        step=0, total_steps=1)


def test_p2t_allocation_hand_computed_and_omega_zero_is_gdpo():
    # one group of two responses; reward a: [1, 0] -> A = [0.707107, -0.707107] (unbiased std
    # 0.707107 + eps 1e-6); reward b constant -> A = 0. GDPO's contrib = A (lambda 1).
    infl = torch.tensor([[[0.0, math.log(3)], [5.0, -5.0]], [[math.log(3), 0.0], [0.0, 0.0]]])
    b = _batch(infl, [[1.0, 1.0], [0.0, 1.0]], [0, 0], [[1, 1], [1, 1]])
    out = methods.compute("p2t", b, methods.options(whiten="none", p2t_coef=1.0,
                                                    p2t_flat_coef=0.0))
    # response 0: softmax [1, 3] / 4, N = 2 -> w = [0.5, 1.5]; response 1: [1.5, 0.5]
    a = 1 / math.sqrt(2) * (1 - 1e-6 * math.sqrt(2))
    assert torch.allclose(out.scores, torch.tensor([[0.5 * a, 1.5 * a], [-1.5 * a, -0.5 * a]]),
                          atol=1e-5)
    assert out.metrics["alloc/a/kept"] == pytest.approx(0.75, abs=1e-6)
    for whiten in ("token", "none"):
        gdpo = methods.advantages("gdpo", b, whiten=whiten)
        assert torch.allclose(methods.advantages("p2t", b, whiten=whiten, p2t_coef=0.0), gdpo)
    assert torch.allclose(methods.advantages("p2t+saw", b, p2t_coef=0.0),
                          methods.advantages("gdpo+saw", b))
    with pytest.raises(ValueError, match="sequence whitening"):
        methods.advantages("p2t", b, whiten="sequence")


def test_p2t_options_are_checked_with_their_flags(tmp_path):
    bad = P2tOptions(p2t_temperature=0.0, p2t_null="zero", p2t_coef=-1.0,
                     p2t_reward_model=str(tmp_path))
    text = " ".join(bad.problems())
    assert "--p2t-temperature" in text and "--p2t-null" in text and "--p2t-coef" in text
    assert "no config.json" in text
    assert P2tOptions().problems() == []


# --- the verifier-information estimator ----------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    tok = load_tokenizer("tiny-random")
    return load_model("tiny-random", seed=3), tok


def _example():
    style = "Answer briefly."
    return Example(id="e", reference="", messages=(
        {"role": "user", "content": f"Name a colour. {style}"},),
        verifier_info=(VerifierInfo("a", style, False), VerifierInfo("b", "Say: blue.", True)))


def _reference_ll(model, tok, messages, response, replace_at=None, toward=None, eps=0.0):
    """Log-likelihood of ``response`` after ``messages`` by a plain forward of the whole
    sequence; the input embedding of response token ``replace_at`` moved by ``eps`` toward
    ``toward`` (as input only)."""
    text = tok.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    ctx = tok(text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ctx + response])
    with torch.no_grad():
        emb = model.get_input_embeddings()(ids).clone()
        if replace_at is not None:
            p = len(ctx) + replace_at
            emb[0, p] = emb[0, p] + eps * (toward - emb[0, p])
        logits = model(inputs_embeds=emb).logits[0, len(ctx) - 1:-1].double()
    lsm = torch.log_softmax(logits, dim=-1)
    return lsm, float(lsm.gather(1, torch.tensor(response)[:, None]).sum())


def _correlation_with_exact_replacement(model, tok) -> float:
    """Checks the estimate against a plain forward (the input-role term equals the
    finite-difference derivative toward the null embedding; the target-role term is exact)
    and returns its correlation with the exact replacement of each token by the pad token."""
    from methods.contexts import replay_messages

    ex = _example()
    g = torch.Generator().manual_seed(0)
    response = torch.randint(5, len(tok) - 1, (7,), generator=g).tolist()
    ids = torch.tensor([response])
    ctx = PolicyContext.of(model, tok, [ex], ids, torch.ones_like(ids), ["a", "b"])
    infl = verifier_influence(ctx, methods.options(p2t_contexts="loo"))
    assert infl.shape == (1, 2, 7) and torch.isfinite(infl).all()
    pad = tok.pad_token_id
    e_pad = model.get_input_embeddings().weight[pad].detach()
    full = replay_messages(ex, {"a", "b"})
    exact, first_order = [], []
    for k, name in enumerate(["a", "b"]):
        without = replay_messages(ex, {"a", "b"} - {name})
        (lw, rw), (lo, ro) = (_reference_ll(model, tok, full, response),
                              _reference_ll(model, tok, without, response))
        for t in range(7):
            eps = 1e-3
            fd = 0.0
            if t < 6:  # the last token is no one's input
                _, rw_e = _reference_ll(model, tok, full, response, t, e_pad, eps)
                _, ro_e = _reference_ll(model, tok, without, response, t, e_pad, eps)
                fd = -((rw_e - ro_e) - (rw - ro)) / eps
            target = (lw[t, response[t]] - lo[t, response[t]]) - (lw[t, pad] - lo[t, pad])
            assert infl[0, k, t].item() == pytest.approx(fd + float(target), rel=2e-2,
                                                          abs=2e-5)
            replaced = response[:t] + [pad] + response[t + 1:]
            exact.append((rw - ro) - (_reference_ll(model, tok, full, replaced)[1]
                                      - _reference_ll(model, tok, without, replaced)[1]))
            first_order.append(infl[0, k, t].item())
    return torch.corrcoef(torch.tensor([exact, first_order]))[0, 1].item()


@pytest.mark.model
def test_influence_is_the_first_order_change_and_tracks_exact_replacement(tiny):
    """On tiny-random as is and with its embeddings drawn to a tenth of their spread around
    their mean (so that replacing a token is a small, nearly linear move): the estimate is
    the first-order change in both, and follows the exact replacement closely in the
    near-linear one (measured: r = 0.74 as is, 0.98 near-linear)."""
    model, tok = tiny
    r_as_is = _correlation_with_exact_replacement(model, tok)
    near = load_model("tiny-random", seed=3)
    with torch.no_grad():
        w = near.get_input_embeddings().weight
        w.copy_(w.mean(dim=0) + 0.1 * (w - w.mean(dim=0)))
    r_near = _correlation_with_exact_replacement(near, tok)
    print(f"verifier information: r with exact replacement {r_as_is} as is, {r_near} near-linear")
    assert r_near > 0.95 and r_near > r_as_is, (r_near, r_as_is)


def test_one_backward_per_slice_and_no_signal_is_not_computed(tiny, monkeypatch):
    import harness.replay as gradients

    model, tok = tiny
    calls = []
    real = gradients.response_input_gradients

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gradients, "response_input_gradients", counted)
    ids = torch.randint(5, 200, (4, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 6, [1] * 3 + [0] * 3])
    ctx = PolicyContext.of(model, tok, [_example()] * 4, ids, mask, ["a", "b"], batch_size=2)
    ctx.group = torch.tensor([0, 0, 1, 1])
    ctx.signal = torch.tensor([[True, True], [True, False], [False, False], [False, False]])
    before = [p.requires_grad for p in model.parameters()]
    infl = verifier_influence(ctx, methods.options())
    assert len(calls) == 1  # the second slice has no signal: not computed
    assert [p.requires_grad for p in model.parameters()] == before
    assert all(p.grad is None for p in model.parameters())
    assert torch.isnan(infl[1, 1]).all() and torch.isnan(infl[2:]).all()
    assert torch.isfinite(infl[0]).all() and torch.isfinite(infl[1, 0]).all()
    assert (infl[1, 0, 4:] == 0).all() and (infl[1, 0, :4] != 0).any()  # padding: 0


@pytest.mark.model
def test_planted_signal_the_code_word_gets_the_credit():
    """SmolLM2 copies a code word only the privileged verifier text holds: reward "code"'s
    influence peaks inside the code word (where the text explains the response)."""
    tok = load_tokenizer("smollm2-135m-instruct")
    model = load_model("smollm2-135m-instruct")
    style = "Answer in one short sentence."
    ex = Example(id="p", reference="", messages=(
        {"role": "user", "content": f"What is the access code? {style}"},),
        verifier_info=(VerifierInfo("style", style, False),
                       VerifierInfo("code", "The access code is QX7-ZEBRA-4412.", True)))
    before = tok("The access code is", add_special_tokens=False)["input_ids"]
    code = tok(" QX7-ZEBRA-4412", add_special_tokens=False)["input_ids"]
    after = tok(".", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([before + code + after])
    ctx = PolicyContext.of(model, tok, [ex], ids, torch.ones_like(ids), ["style", "code"])
    w = methods.p2t.profile(verifier_influence(ctx, methods.options()), ctx.response_mask,
                            methods.options())
    span = range(len(before), len(before) + len(code))
    assert int(w[0, 1].argmax()) in span
    assert w[0, 1, span.start:span.stop].sum() > 0.5 * w[0, 1].sum()


# --- the reward-model variant --------------------------------------------------------------
STEP = "<extra_0>"


def _reward_model(folder, kind, tok, shrink=1.0, labels=2):
    """A tiny random token (process) or sequence classifier with the policy's tokenizer plus
    the step token, saved as an HF folder."""
    from transformers import LlamaForSequenceClassification, LlamaForTokenClassification

    from harness.models import tiny_random_config

    tok = __import__("copy").deepcopy(tok)
    tok.add_special_tokens({"additional_special_tokens": [STEP]})
    config = tiny_random_config(len(tok))
    config.num_labels, config.pad_token_id = labels, tok.pad_token_id
    torch.manual_seed(5)
    cls = LlamaForTokenClassification if kind == "token" else LlamaForSequenceClassification
    model = cls(config)
    with torch.no_grad():
        w = model.get_input_embeddings().weight
        w.copy_(w.mean(dim=0) + shrink * (w - w.mean(dim=0)))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def _policy_rows(tok, texts):
    rows = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    width = max(map(len, rows)) + 2
    ids = torch.full((len(rows), width), tok.pad_token_id)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
    return ids, mask


@pytest.mark.model
def test_reward_model_token_rewards_per_step(tmp_path, tiny, monkeypatch):
    from methods.p2t import reward_model

    model, tok = tiny
    path = _reward_model(tmp_path / "prm", "token", tok)
    texts = ["First add two.\n\nThen double it.\n\nSo 8.", "Just 8."]
    ids, mask = _policy_rows(tok, texts)
    ctx = PolicyContext.of(model, tok, [_example()] * 2, ids, mask, ["a", "b"])
    calls = []
    real = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = reward_model.token_rewards(ctx, methods.options(p2t_reward_model=path))
    assert len(calls) == 1  # single: one backward for the batch
    assert out.shape == (2, 2, ids.shape[1])
    length = mask.sum(dim=1)
    for i in range(2):
        n = int(length[i])
        assert (out[i, :, n - 1:] == 0).all()  # EOS and padding carry nothing
        flat, red = out[i, 0, :n - 1], out[i, 1, :n - 1]
        values = sorted(set(flat.tolist()))
        assert len(values) == (3 if i == 0 else 1) and all(0 < v < 1 for v in values)
        for v in values:  # per step: sum of N_s R_s softmax = N_s R_s
            step = flat == v
            assert red[step].sum().item() == pytest.approx(v * int(step.sum()), rel=1e-5)
    calls.clear()
    per_step = reward_model.token_rewards(ctx, methods.options(p2t_reward_model=path,
                                                               p2t_backward="per_step"))
    assert len(calls) == 3 and torch.equal(per_step[:, 0], out[:, 0])
    signed = reward_model.token_rewards(ctx, methods.options(p2t_reward_model=path,
                                                             p2t_reward_scale="signed"))
    assert torch.allclose(signed[:, 0], (2 * out[:, 0] - 1) * (out[:, 0] != 0))


@pytest.mark.model
def test_reward_model_influence_is_first_order_and_tracks_exact_replacement(tmp_path, tiny):
    """A process reward model's influences (a step of 8 tokens scored at the step token after
    it) against finite differences and the exact replacement of each token by the pad token,
    as is and near-linear (embeddings at 3 % of their spread around their mean, so that a
    replacement is a small move): measured r = -0.09 as is, 0.99 near-linear."""
    from methods.p2t.null import null_distribution, null_embedding
    from methods.p2t.reward_model import attribute, load, scalars

    _, tok = tiny
    corr = {}
    for shrink in (1.0, 0.03):
        model, rtok, kind = load(_reward_model(tmp_path / f"rm{shrink}", "token", tok, shrink))
        assert kind == "token"
        embed = model.get_input_embeddings()
        e_null = null_embedding(embed, null_distribution("pad", embed.num_embeddings, rtok))
        step = rtok.convert_tokens_to_ids(STEP)
        ids = torch.randint(5, 500, (1, 9), generator=torch.Generator().manual_seed(2))
        ids[0, 8] = step
        attn = torch.ones_like(ids)
        owner = torch.zeros_like(ids)
        owner[0, 8] = -1  # the step token is scored, not attributed
        infl, rewards = attribute(model, embed, e_null, ids, attn, [(0, 0, 8)], owner,
                                  "logit_diff", "single")
        assert infl[0, 8] == 0
        exact_model = __import__("copy").deepcopy(model).double()  # the reference in float64

        def score(x=None, emb=None):
            with torch.no_grad():
                e = exact_model.get_input_embeddings()(x) if emb is None else emb
                out = exact_model(inputs_embeds=e, attention_mask=attn).logits[0, 8]
            return float(scalars(out, "logit_diff")[1])

        s0 = score(ids)
        assert rewards[(0, 0)] == pytest.approx(
            float(torch.softmax(exact_model(ids).logits[0, 8], -1)[1]), rel=1e-5)
        exact = []
        for j in range(8):
            eps = 1e-3
            emb = exact_model.get_input_embeddings()(ids).detach().clone()
            emb[0, j] += eps * (e_null.double() - emb[0, j])
            # (the finite difference carries float32 noise of the attention kernel)
            assert infl[0, j].item() == pytest.approx(-(score(emb=emb) - s0) / eps, rel=5e-2,
                                                      abs=1e-4)
            replaced = ids.clone()
            replaced[0, j] = rtok.pad_token_id
            exact.append(s0 - score(replaced))
        corr[shrink] = torch.corrcoef(torch.tensor([exact, infl[0, :8].tolist()]))[0, 1].item()
    print(f"reward model: r with exact replacement {corr}")
    assert corr[0.03] > 0.95 and corr[0.03] > corr[1.0], corr


def test_reward_model_folders_are_checked(tmp_path, tiny):
    from transformers import LlamaConfig

    from methods.p2t.reward_model import load

    LlamaConfig(architectures=["LlamaForCausalLM"]).save_pretrained(tmp_path / "lm")
    with pytest.raises(ValueError, match="neither a token nor a sequence classifier"):
        load(str(tmp_path / "lm"))


@pytest.mark.slow
def test_both_variants_train_a_step_in_the_loop(tmp_path):
    """Both variants (the reward model's: a tiny process reward model) go through collect
    and update on the toy task, in process, and move the policy."""
    from pathlib import Path

    from harness import engine as eng
    from harness.config import resolve
    from harness.trainer import Trainer

    eng.init_single_process()
    toy = str(Path(__file__).parent / "plugins" / "toy_task.py")
    tiny = {"model": "tiny-random", "method": "p2t", "steps": 1, "prompts_per_step": 2,
            "group_size": 4, "max_response_tokens": 12, "eval_max_response_tokens": 8,
            "eval_limit": 2, "results_dir": str(tmp_path), "max_prompt_tokens": 4096}
    rm = _reward_model(tmp_path / "prm", "token", load_tokenizer("tiny-random"))
    for extra in ({}, {"p2t_reward_model": rm}):
        trainer = Trainer(resolve("smoke", {**tiny, "task": "toy", "plugins": (toy,),
                                            "lr": 1e-2, **extra}))
        data, metrics = trainer.collect(0)
        metrics.update(trainer.update(data))
        assert torch.isfinite(data.advantages).all()
        assert (data.advantages != 0).any() and metrics["grad_norm"] > 0
        assert metrics["time/replay"] > 0
        if extra:
            assert 0 < metrics["p2t/step_reward"] < 1
        else:
            assert 0 < metrics["alloc/kept"] <= 1


# --- mutants an audit found no test killed --------------------------------------------------
@pytest.mark.model
def test_reward_model_allocation_weighs_flat_by_alpha_and_redistributed_by_omega(tmp_path,
                                                                                  tiny):
    """S = GDPO + alpha R_s + omega N_s R_s softmax: with alpha != omega and flat !=
    redistributed, swapping the two coefficients changes every number."""
    path = _reward_model(tmp_path / "prm", "token", tiny[1])
    # the pass's output [N, 2, T]: flat R_s and redistributed N_s R_s softmax, by hand
    out = torch.tensor([[[0.5, 0.5], [0.2, 0.8]], [[0.25, 0.25], [0.4, 0.1]]])
    b = RolloutBatch(rewards=torch.tensor([[1.0, 0.0], [0.0, 0.0]]), reward_names=("a", "b"),
                     reward_bounds=((0.0, 1.0),) * 2, group=torch.tensor([0, 0]),
                     response_mask=torch.tensor([[1, 1], [1, 1]]),
                     passes={"attribution": out}, step=0, total_steps=1)
    got = methods.advantages("p2t", b, whiten="none", p2t_reward_model=path,
                             p2t_flat_coef=2.0, p2t_coef=0.5)
    # GDPO: reward a [1, 0] -> +-0.707107 (eps 1e-6), b constant -> 0
    a = 1 / math.sqrt(2) * (1 - 1e-6 * math.sqrt(2))
    expected = torch.tensor([[a + 2.0 * 0.5 + 0.5 * 0.2, a + 2.0 * 0.5 + 0.5 * 0.8],
                             [-a + 2.0 * 0.25 + 0.5 * 0.4, -a + 2.0 * 0.25 + 0.5 * 0.1]])
    assert torch.allclose(got, expected, atol=1e-5)


@pytest.mark.model
def test_reward_model_temperature_sharpens_each_steps_softmax(tmp_path, tiny):
    """softmax(I / tau): at tau 0.5 a step's weights are the squares of tau 1's, renormalised;
    a variant that ignored tau would give tau 1's."""
    from methods.p2t import reward_model

    model, tok = tiny
    path = _reward_model(tmp_path / "prm", "token", tok)
    ids, mask = _policy_rows(tok, ["First add two.\n\nThen double it.\n\nSo 8."])
    ctx = PolicyContext.of(model, tok, [_example()], ids, mask, ["a", "b"])
    one, half = (reward_model.token_rewards(ctx, methods.options(p2t_reward_model=path,
                                                                 p2t_temperature=tau))
                 for tau in (1.0, 0.5))
    n = int(mask.sum()) - 1
    flat = one[0, 0, :n]
    for v in sorted(set(flat.tolist())):
        step = flat == v
        w1 = one[0, 1, :n][step] / (v * int(step.sum()))
        w_half = half[0, 1, :n][step] / (v * int(step.sum()))
        assert not torch.allclose(w1, torch.full_like(w1, 1 / len(w1)), atol=1e-4)
        assert torch.allclose(w_half, w1 ** 2 / (w1 ** 2).sum(), atol=1e-5)


@pytest.mark.parametrize("mode", ["loo", "single", "joint"])
def test_each_context_mode_puts_with_and_without_the_right_way_round(tiny, mode):
    """The last response token is no one's input: its influence is exactly the target-role
    term, (lp_with - lp_without) - (lq_with - lq_without), with the mode's own contexts:
    loo all vs all but k, single k's alone vs none, joint all vs none. Swapping with and
    without flips its sign."""
    from methods.contexts import replay_messages

    model, tok = tiny
    ex = _example()
    response = torch.randint(5, len(tok) - 1, (6,), generator=torch.Generator().manual_seed(4))
    ids = response[None]
    ctx = PolicyContext.of(model, tok, [ex], ids, torch.ones_like(ids), ["a", "b"])
    infl = verifier_influence(ctx, methods.options(p2t_contexts=mode))
    pad, last = tok.pad_token_id, len(response) - 1
    for k, name in enumerate(["a", "b"]):
        with_, without = {"loo": ({"a", "b"}, {"a", "b"} - {name}),
                          "single": ({name}, set()), "joint": ({"a", "b"}, set())}[mode]
        lw, _ = _reference_ll(model, tok, replay_messages(ex, with_), response.tolist())
        lo, _ = _reference_ll(model, tok, replay_messages(ex, without), response.tolist())
        r = int(response[last])
        target = float((lw[last, r] - lo[last, r]) - (lw[last, pad] - lo[last, pad]))
        assert abs(target) > 1e-4  # a sign to get wrong
        assert infl[0, k, last].item() == pytest.approx(target, rel=1e-3, abs=1e-6)


def _one_response(model, tok, n: int, seed: int):
    """A context over one random response of ``n`` tokens to ``_example()``, its leave-one-out
    pair for reward "a" (full, without) and the response as a list."""
    from methods.contexts import replay_messages

    ex = _example()
    response = torch.randint(5, len(tok) - 1, (n,), generator=torch.Generator().manual_seed(seed))
    ids = response[None]
    ctx = PolicyContext.of(model, tok, [ex], ids, torch.ones_like(ids), ["a", "b"])
    return (ctx, replay_messages(ex, {"a", "b"}), replay_messages(ex, {"b"}),
            response.tolist())


def test_bench_p2t_exact_against_plain_forwards(tiny):
    """bench p2t-exact's exact influence is R(y) - R(y with y_t -> pad) by plain forwards, and
    its target term is P2T's own (so the input role it reports is I - target)."""
    from lab.bench.p2t_exact import agreement, exact_influence

    model, tok = tiny
    ctx, full, without, resp = _one_response(model, tok, 6, seed=8)
    pad = tok.pad_token_id
    exact, target = exact_influence(ctx, 0, (full, without), pad)
    lw, rw = _reference_ll(model, tok, full, resp)
    lo, ro = _reference_ll(model, tok, without, resp)
    for t in range(6):
        replaced = resp[:t] + [pad] + resp[t + 1:]
        want = (rw - ro) - (_reference_ll(model, tok, full, replaced)[1]
                            - _reference_ll(model, tok, without, replaced)[1])
        assert exact[t].item() == pytest.approx(want, rel=1e-3, abs=1e-4)
        tgt = (lw[t, resp[t]] - lo[t, resp[t]]) - (lw[t, pad] - lo[t, pad])
        assert target[t].item() == pytest.approx(float(tgt), rel=1e-3, abs=1e-5)
    got = agreement(ctx, methods.options(), [0], "pad")
    assert set(got) == {"a", "b"} and got["a"]["tokens"] == 6
    assert -1.0 <= got["a"]["r_influence"] <= 1.0 and got["a"]["input_size_ratio"] > 0


def test_bench_p2t_exact_mean_null_against_plain_forwards(tiny):
    """The mean null is no token: exact replacement feeds the mean embedding at t (the other
    inputs untouched) and scores the null there by ``mean_v log p(v)``, as P2T's target does;
    checked against whole-sequence forwards with the embedding swapped in."""
    from lab.bench.p2t_exact import exact_influence
    from methods.p2t.null import null_distribution, null_embedding

    model, tok = tiny
    ctx, full, without, resp = _one_response(model, tok, 5, seed=3)
    embed = model.get_input_embeddings()
    q = null_distribution("mean", embed.num_embeddings, tok)
    e_mean = null_embedding(embed, q)
    assert torch.allclose(e_mean, embed.weight.mean(0), atol=1e-6)
    exact, target = exact_influence(ctx, 0, (full, without), (q, e_mean))
    lw, rw = _reference_ll(model, tok, full, resp)
    lo, ro = _reference_ll(model, tok, without, resp)
    for t in range(5):
        scores = []
        for messages in (full, without):
            lsm, _ = _reference_ll(model, tok, messages, resp, replace_at=t, toward=e_mean,
                                   eps=1.0)
            picked = lsm.gather(1, torch.tensor(resp)[:, None])[:, 0]
            scores.append(float(picked.sum() - picked[t] + lsm[t].mean()))
        want = (rw - ro) - (scores[0] - scores[1])
        assert exact[t].item() == pytest.approx(want, rel=1e-3, abs=1e-4)
        tgt = (lw[t, resp[t]] - lo[t, resp[t]]) - (lw[t].mean() - lo[t].mean())
        assert target[t].item() == pytest.approx(float(tgt), rel=1e-3, abs=1e-5)
    # the hook is gone: the sentinel id is out of range again
    with pytest.raises(IndexError):
        embed(torch.tensor([embed.num_embeddings]))


def test_signed_variant_sends_a_negative_advantage_to_the_disagreeing_tokens():
    """--p2t-sign advantage: softmax(sign(A) I / tau). The failing response's influences
    [ln 3, 0] favour token 0 (the verifier's text makes it likelier); its negative advantage
    goes to token 1 instead: w = [0.5, 1.5] (with omega 1, alpha 0), not [1.5, 0.5]. The
    positive one is unchanged."""
    infl = torch.tensor([[[0.0, math.log(3)], [5.0, -5.0]], [[math.log(3), 0.0], [0.0, 0.0]]])
    b = _batch(infl, [[1.0, 1.0], [0.0, 1.0]], [0, 0], [[1, 1], [1, 1]])
    a = 1 / math.sqrt(2) * (1 - 1e-6 * math.sqrt(2))
    common = dict(whiten="none", p2t_coef=1.0, p2t_flat_coef=0.0)
    same = methods.advantages("p2t", b, **common)
    signed = methods.advantages("p2t", b, p2t_sign="advantage", **common)
    assert torch.allclose(same, torch.tensor([[0.5 * a, 1.5 * a], [-1.5 * a, -0.5 * a]]),
                          atol=1e-5)
    assert torch.allclose(signed, torch.tensor([[0.5 * a, 1.5 * a], [-0.5 * a, -1.5 * a]]),
                          atol=1e-5)
    assert "p2t_sign" in " ".join(P2tOptions(p2t_sign="both").problems())
    assert "verifier-information variant" in " ".join(
        P2tOptions(p2t_sign="advantage", p2t_reward_model="/nonexistent").problems())
