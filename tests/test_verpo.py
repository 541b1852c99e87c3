"""VERPO (advantage modulation): geometry, controller, evidence selection and the pass, on
hand-computed numbers."""
import math

import pytest
import torch

import methods
from methods import RolloutBatch
from methods.verpo import (correct, evidence_plan, geometry, token_weights, with_evidence,
                           NEGATIVE, POSITIVE)


def test_geometry_without_nuisance_is_the_raw_task_direction():
    # p uniform and q0 = p: n = (q+ + q-)/2 - q0 = [1/15, 1/15, -2/15] is p-orthogonal to
    # d = [0.4, -0.4, 0] (cov 0), so alpha = 0 and d_fec = d
    p = torch.full((3,), 1 / 3)
    g, cost = geometry(p, p.clone(), torch.tensor([0.6, 0.2, 0.2]),
                       torch.tensor([0.2, 0.6, 0.2]), torch.tensor(0), 1e-8)
    assert g.item() == pytest.approx(0.4 - 0.0, abs=1e-6)  # d[y] - E_p d
    assert cost.item() == pytest.approx((0.16 + 0.16) / 3, abs=1e-6)  # Var_p(d)


def test_geometry_projects_out_the_nuisance_direction():
    p = torch.tensor([0.5, 0.3, 0.2])
    q0, q_pos, q_neg = (torch.tensor([0.4, 0.4, 0.2]), torch.tensor([0.7, 0.2, 0.1]),
                        torch.tensor([0.3, 0.3, 0.4]))
    # d = [0.4, -0.1, -0.3], n = [0.1, -0.15, 0.05]
    # E_p d = 0.11, E_p n = 0.015, E_p dn = 0.0215, E_p n^2 = 0.01225, E_p d^2 = 0.101
    cov_dn, var_n, var_d = 0.0215 - 0.11 * 0.015, 0.01225 - 0.015 ** 2, 0.101 - 0.11 ** 2
    alpha = cov_dn / var_n
    d_fec_y = -0.1 - alpha * (-0.15)  # the sampled token is 1
    mean_fec = 0.11 - alpha * 0.015
    g, cost = geometry(p, q0, q_pos, q_neg, torch.tensor(1), 0.0)
    assert g.item() == pytest.approx(d_fec_y - mean_fec, abs=1e-6)  # 0.06237
    assert cost.item() == pytest.approx(var_d - cov_dn ** 2 / var_n, abs=1e-6)  # 0.05613
    # the projected direction is p-orthogonal to the nuisance
    n = (q_pos + q_neg) / 2 - q0
    d_fec = (q_pos - q_neg) - alpha * n
    assert float((p * d_fec * n).sum() - (p * d_fec).sum() * (p * n).sum()) == \
        pytest.approx(0.0, abs=1e-7)


def test_controller_accepts_aligned_tokens_only():
    # [N=2, 3, T=2]: alignment, cost, available
    ev = torch.tensor([[[0.4, -0.2], [0.1, 0.1], [1.0, 1.0]],
                       [[0.1, 0.3], [0.0, 0.0], [1.0, 1.0]]])
    a = torch.tensor([0.5, -0.5])
    w = token_weights(a, ev, torch.ones(2, 2), 0.0025, 2.5e-5)
    h = 0.5 * 0.4
    assert w[0, 0].item() == pytest.approx(h / (h + 0.0025 * 0.1 + 2.5e-5), abs=1e-7)
    # against the advantage's sign (or no signal) nothing is accepted
    assert w[0, 1] == 0 and torch.all(w[1] == 0)
    no_evidence = ev.clone()
    no_evidence[:, 2] = 0
    assert torch.all(token_weights(a, no_evidence, torch.ones(2, 2), 0.0025, 2.5e-5) == 0)


def _batch(evidence):
    return RolloutBatch(rewards=torch.tensor([[1.0], [0.0]]), reward_names=("ok",),
                        reward_bounds=((0.0, 1.0),), group=torch.tensor([0, 0]),
                        response_mask=torch.ones(2, 2, dtype=torch.long),
                        passes={"evidence": evidence})


def test_advantage_modulation_hand_computed_and_lambda_zero_is_grpo():
    ev = torch.tensor([[[0.4, -0.2], [0.1, 0.1], [1.0, 1.0]],
                       [[0.1, 0.3], [0.0, 0.0], [1.0, 1.0]]])
    a = 0.5 / (math.sqrt(0.5) + 1e-6)  # GRPO on one group of two: +-0.7071
    w = a * 0.4 / (a * 0.4 + 0.0025 * 0.1 + 2.5e-5)
    S = methods.advantages("verpo", _batch(ev))
    assert torch.allclose(S, torch.tensor([[a * (1 + w), a], [-a, -a]]), atol=1e-6)
    assert torch.allclose(methods.advantages("verpo", _batch(ev), verpo_lambda=2.0)[0, 0],
                          torch.tensor(a * (1 + 2 * w)), atol=1e-6)
    grpo = methods.advantages("grpo", _batch(ev))
    assert torch.equal(methods.advantages("verpo", _batch(ev), verpo_lambda=0.0), grpo)
    # a pure amplifier: |S| >= |A| and the sign never flips
    assert torch.all(S.abs() >= grpo.abs() - 1e-7) and torch.all(S * grpo >= 0)
    out = methods.compute("verpo", _batch(ev))
    assert out.metrics["verpo/evidence_rows"] == 1.0
    assert out.metrics["verpo/accepted"] == pytest.approx(0.25)


def test_correct_means_every_reward_at_its_maximum_or_the_named_one():
    r = torch.tensor([[1.0, 3.0], [1.0, 1.2], [0.0, 3.0], [float("nan"), 3.0],
                      [float("nan"), float("nan")]])
    names, bounds = ("format", "correctness"), ((0.0, 1.0), (-3.0, 3.0))
    assert correct(r, names, bounds, "all").tolist() == [True, False, False, True, False]
    assert correct(r, names, bounds, "correctness").tolist() == [True, False, True, True,
                                                                 False]
    with pytest.raises(ValueError, match="neither 'all' nor a reward"):
        correct(r, names, bounds, "speed")


def test_evidence_comes_from_the_same_group_in_sampling_order():
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    ok = torch.tensor([True, False, True, False, True, True])
    plan = evidence_plan(group, ok, negatives=2)
    # row 0: correct sibling 2, incorrect siblings 1, 3; row 1: 0, then 3 and (cycled) 3
    assert plan[:2] == [(0, 2, [1, 3]), (1, 0, [3, 3])]
    assert [row for row, _, _ in plan] == [0, 1, 2, 3]  # group 1 has no incorrect response
    assert evidence_plan(torch.tensor([0, 0]), torch.tensor([True, False]), 1) == []


def test_the_evidence_is_written_after_the_request():
    msgs = ({"role": "system", "content": "be good"}, {"role": "user", "content": "Q?"})
    pos = with_evidence(msgs, POSITIVE, "A1")
    assert pos[0] == msgs[0] and pos[1]["content"].startswith("Q?") and "A1" in pos[1]["content"]
    assert msgs[1]["content"] == "Q?"  # the example's messages are not changed
    assert "incorrect" in with_evidence(msgs, NEGATIVE, "A2")[1]["content"]


@pytest.mark.model
def test_the_evidence_pass_on_a_model():
    from harness.models import load_model, load_tokenizer
    from harness.replay import PolicyContext
    from methods.verpo import evidence
    from tasks.base import Example

    tok, model = load_tokenizer("tiny-random"), load_model("tiny-random")
    ex = Example(id="e", messages=({"role": "user", "content": "Name a colour."},),
                 reference="")
    texts = ["red", "blue sky", "green", "???"]
    ids = torch.tensor([tok(t + " is my answer", add_special_tokens=False)["input_ids"][:3]
                        for t in texts])
    ctx = PolicyContext.of(model, tok, [ex] * 4, ids, torch.ones_like(ids), ("ok",),
                           rewards=torch.tensor([[1.0], [0.0], [1.0], [0.0]]), texts=texts)
    ctx.group = torch.tensor([0, 0, 0, 1])  # the last response is alone in its group
    out = evidence(ctx, methods.options(replay_chunk=2))
    assert out.shape == (4, 3, 3) and torch.isfinite(out).all()
    # rows 0 and 2 (correct) have a correct sibling and an incorrect one; row 1 (incorrect)
    # has no other incorrect response in its group, row 3 no group at all: no evidence
    assert torch.all(out[[0, 2], 2] == 1) and torch.all(out[[1, 3]] == 0)
    assert out[[0, 2], 0].abs().sum() > 0 and torch.all(out[:, 1] >= 0)


def test_options_check_themselves():
    problems = methods.get("verpo").problems(methods.options(verpo_negatives=0,
                                                             verpo_teacher="ema"))
    assert any("verpo_negatives is 0" in p for p in problems)
    assert any("unknown verpo_teacher 'ema'" in p for p in problems)
    assert methods.get("verpo").needs == ("evidence",)
    assert methods.get("verpo").models(methods.options(verpo_teacher="initial")) == \
        {"policy", "initial"}


class FakeContext:
    """A PassContext whose hidden states are fixed random vectors per (context text, model)
    and whose heads are one linear map per model: the evidence pass's wiring, exactly."""

    def __init__(self, texts, rewards, group, temperature, vocab=5, width=3, length=2):
        from types import SimpleNamespace

        gen = torch.Generator().manual_seed(0)
        self.examples = [SimpleNamespace(messages=({"role": "user", "content": "Q?"},))] * \
            len(texts)
        self.texts, self.rewards, self.group = texts, rewards, group
        self.reward_names, self.reward_bounds = ("format", "correct"), ((0.0, 1.0),) * 2
        self.temperature, self.batch_size = temperature, 8
        self.response_ids = torch.randint(0, vocab, (len(texts), length), generator=gen)
        self.response_mask = torch.ones(len(texts), length)
        self.heads = {m: torch.nn.Linear(width, vocab, bias=False) for m in ("policy", "initial")}
        for m, head in self.heads.items():
            head.weight.data = torch.randn(vocab, width, generator=gen) * 2
        self.states, self.gen, self.shape = {}, gen, (length, width)

    def state(self, content, model):
        if (content, model) not in self.states:
            self.states[content, model] = torch.randn(*self.shape, generator=self.gen)
        return self.states[content, model]

    def hidden(self, contexts, rows, model="policy"):
        return torch.stack([self.state(c[-1]["content"], model) for c in contexts])

    def head(self, model="policy"):
        return self.heads[model]


def test_the_evidence_pass_wiring_hand_computed():
    """Two negatives, temperature 0.7, the initial model as teacher, one format-invalid
    sibling: the pass's alignment and cost equal an independent computation, and each wrong
    wiring (q- mixed as logits, the temperature ignored, q0 or p from the wrong model, the
    format-invalid sibling used) gives other numbers."""
    from methods.verpo import evidence

    texts = ["right", "", "wrong a", "wrong b", "right too", "unformatted"]
    rewards = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0],
                            [0.0, 0.0]])
    ctx = FakeContext(texts, rewards, torch.zeros(6, dtype=torch.long), temperature=0.7)
    opts = methods.options(verpo_negatives=2, verpo_teacher="initial", replay_chunk=1)
    out = evidence(ctx, opts)

    def softmax(model, content, temp=0.7):
        return torch.softmax(ctx.heads[model](ctx.state(content, model)) / temp, dim=-1)

    def expected(neg_mix="probs", temp=0.7, q0_model="initial", p_model="policy",
                 negs=("wrong a", "wrong b")):
        row = 0  # correct: its positive is "right too"; row 1 is empty, row 5 unformatted
        pos_ctx = POSITIVE.format(request="Q?", evidence="right too")
        neg_ctx = [NEGATIVE.format(request="Q?", evidence=t) for t in negs]
        p = softmax(p_model, "Q?", temp)
        q0 = softmax(q0_model, "Q?", temp)
        qp = softmax("initial", pos_ctx, temp)
        if neg_mix == "probs":
            qn = sum(softmax("initial", c, temp) for c in neg_ctx) / len(neg_ctx)
        else:  # the wrong mix: logits averaged, then one softmax
            logits = sum(ctx.heads["initial"](ctx.state(c, "initial")) for c in neg_ctx)
            qn = torch.softmax(logits / len(neg_ctx) / temp, dim=-1)

        def inner(a, b):
            return (p * a * b).sum(-1) - (p * a).sum(-1) * (p * b).sum(-1)

        d, nuis = qp - qn, (qp + qn) / 2 - q0
        d_fec = d - (inner(d, nuis) / (inner(nuis, nuis) + 1e-8))[:, None] * nuis
        y = ctx.response_ids[row]
        g = d_fec[torch.arange(len(y)), y] - (p * d_fec).sum(-1)
        return g, inner(d_fec, d_fec)

    g, cost = expected()
    assert torch.allclose(out[0, 0], g, atol=1e-6) and torch.allclose(out[0, 1], cost, atol=1e-7)
    assert torch.all(out[0, 2] == 1) and torch.all(out[[1, 5], 2] == 1)  # they get evidence
    wrong = {"q- from logits": expected(neg_mix="logits"), "temperature 1": expected(temp=1.0),
             "q0 by the policy": expected(q0_model="policy"),
             "p by the teacher": expected(p_model="initial"),
             "unformatted negative": expected(negs=("unformatted", "wrong a"))}
    for name, (g_bad, c_bad) in wrong.items():
        assert not torch.allclose(out[0, 0], g_bad, atol=1e-4), name


def test_evidence_is_taken_from_format_valid_non_empty_siblings_only():
    from methods.verpo import usable_evidence

    rewards = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    usable = usable_evidence(["a", "b", "c", "  "], rewards, ("format", "correct"),
                             ((0.0, 1.0), (0.0, 1.0)))
    assert usable.tolist() == [True, True, False, False]
    # a task without a format reward has no format to fail: only empty texts are skipped
    assert usable_evidence(["a", ""], rewards[:2, 1:], ("correct",), ((0.0, 1.0),)).tolist() \
        == [True, False]
    # 0 and 4 correct, 1 incorrect, 2 unformatted, 3 empty (one group)
    group, ok = torch.zeros(5, dtype=torch.long), torch.tensor([True, False, False, False, True])
    usable = torch.tensor([True, True, False, False, True])
    assert evidence_plan(group, ok, 2)[0] == (0, 4, [1, 2])
    plan = evidence_plan(group, ok, 2, usable)
    assert plan[0] == (0, 4, [1, 1])  # the unformatted and the empty sibling are skipped
    assert (2, 0, [1, 1]) in plan  # an unusable response still receives evidence


def test_the_projection_ridge_must_be_positive():
    problems = methods.get("verpo").problems(methods.options(verpo_proj_eps=0.0))
    assert any("verpo_proj_eps > 0" in p for p in problems)
