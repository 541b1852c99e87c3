"""MRTPO and the replay engine: distances, relevance, weights, replay prompts, planted signal."""
import math

import pytest
import torch
from scipy.spatial.distance import jensenshannon

import methods
from harness.replay import PolicyContext
from methods import RolloutBatch, cort, mrtpo
from methods.contexts import replay_messages
from methods.mrtpo import mrtpo_token_weights
from methods.tokens import js_distance, js_distances, js_from_logprobs


def relevance(model, tokenizer, examples, ids, mask, names, mode="loo"):
    """MRTPO's replay pass on responses scored by one model."""
    ctx = PolicyContext.of(model, tokenizer, examples, ids, mask, names)
    return mrtpo.relevance(ctx, methods.options(mrtpo_replay=mode))


def contrast(model, tokenizer, examples, ids, mask):
    """CoRT's contrast pass, [N, T]."""
    ctx = PolicyContext.of(model, tokenizer, examples, ids, mask, ())
    return cort.contrast(ctx, methods.options())[:, 0]


def test_js_distance_matches_scipy():
    g = torch.Generator().manual_seed(0)
    logits_p, logits_q = torch.randn(2, 7, 50, generator=g, dtype=torch.float64)
    ours = js_from_logprobs(torch.log_softmax(logits_p, -1), torch.log_softmax(logits_q, -1))
    p, q = torch.softmax(logits_p, -1).numpy(), torch.softmax(logits_q, -1).numpy()
    for i in range(7):
        assert ours[i].item() == pytest.approx(jensenshannon(p[i], q[i]), abs=1e-7)
    same = js_from_logprobs(torch.log_softmax(logits_p, -1), torch.log_softmax(logits_p, -1))
    assert torch.all(same == 0.0)  # equal distributions: exactly 0, not rounding's 1e-4
    one = torch.log_softmax(torch.tensor([[6.0, 0.0], [0.3, 0.1]]), -1)
    assert js_from_logprobs(one, one).tolist() == [0.0, 0.0]  # float32 too
    assert ours.max() <= math.sqrt(math.log(2)) + 1e-9


def test_chunked_equals_unchunked():
    g = torch.Generator().manual_seed(1)
    head = torch.nn.Linear(16, 300, bias=False)
    h_p, h_q = torch.randn(2, 3, 37, 16, generator=g)
    full = js_distance(h_p, h_q, head, temperature=0.8, chunk=1000)
    for chunk in (1, 5, 16):
        assert torch.allclose(js_distance(h_p, h_q, head, 0.8, chunk), full, atol=1e-6)


def test_distances_to_several_contexts_equal_one_at_a_time():
    g = torch.Generator().manual_seed(2)
    head = torch.nn.Linear(16, 300, bias=False)
    h_p, *h_qs = torch.randn(4, 3, 37, 16, generator=g)
    many = js_distances(h_p, h_qs, head, temperature=0.8, chunk=5)
    assert many.shape == (3, 3, 37)
    for c, h_q in enumerate(h_qs):
        assert torch.allclose(many[c], js_distance(h_p, h_q, head, 0.8, 1000), atol=1e-6)
    assert not torch.allclose(many[0], many[1])


# --- weights -------------------------------------------------------------------------------
def _mask(lengths, width):
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()


def test_weights_have_mean_one_and_shuffle_keeps_the_multiset():
    g = torch.Generator().manual_seed(2)
    mask = _mask([5, 3, 6], 6)
    d = torch.rand(3, 2, 6, generator=g)
    d[1, 1] = 0.0  # a replay that changed nothing: uniform weights
    w = mrtpo_token_weights(d, mask, beta=0.5)
    m = mask[:, None, :].float()
    assert torch.allclose((w * m).sum(-1) / m.sum(-1), torch.ones(3, 2), atol=1e-6)
    assert torch.all(w[mask[:, None, :].expand_as(w) == 0] == 0)
    assert torch.allclose(w[1, 1, :3], torch.ones(3))
    s = mrtpo_token_weights(d, mask, beta=0.5, shuffle=True, seed=7)
    for n in range(3):
        valid = mask[n].bool()
        for k in range(2):
            assert torch.allclose(s[n, k, valid].sort().values, w[n, k, valid].sort().values)
    assert not torch.allclose(s, w)


def _batch(relevance, lengths=(2, 2)):
    mask = _mask(list(lengths), max(lengths))
    return RolloutBatch(rewards=torch.tensor([[1.0, 3.0], [0.0, -3.0]]), reward_names=("a", "b"),
                        reward_bounds=((0.0, 1.0), (-3.0, 3.0)), group=torch.tensor([0, 0]),
                        response_mask=mask,
                        passes={} if relevance is None else {"replay": relevance})


def test_mrtpo_hand_computed():
    # A_a = A_b = [+0.707106, -0.707106] (one group of two)
    # distances: response 0: a [0.3, 0.1], b [0, 0.4]; response 1: a [0.2, 0.2], b [0.1, 0.3]
    # rho (mean 1):       0: a [1.5, 0.5], b [0, 2];   1: a [1, 1],     b [0.5, 1.5]
    # w = 0.5 + 0.5 rho:  0: a [1.25, 0.75], b [0.5, 1.5]; 1: a [1, 1], b [0.75, 1.25]
    # S (no whitening) = sum_k w_k A_k: 0: 0.707106 * [1.75, 2.25]; 1: -0.707106 * [1.75, 2.25]
    d = torch.tensor([[[0.3, 0.1], [0.0, 0.4]], [[0.2, 0.2], [0.1, 0.3]]])
    S = methods.advantages("mrtpo", _batch(d), whiten="none")
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert torch.allclose(S, torch.tensor([[1.75 * a, 2.25 * a], [-1.75 * a, -2.25 * a]]),
                          atol=1e-6)


def test_beta_zero_is_gdpo_exactly_and_mrtpo_composes():
    g = torch.Generator().manual_seed(3)
    d = torch.rand(2, 2, 2, generator=g)
    b = _batch(d)
    assert torch.equal(methods.advantages("mrtpo", b, mrtpo_beta=0.0),
                       methods.advantages("gdpo", b))
    assert torch.equal(methods.advantages("mrtpo+saw", b, mrtpo_beta=0.0),
                       methods.advantages("saw", b))
    assert methods.get("mrtpo+saw").needs == ("replay",)
    with pytest.raises(ValueError, match="compose it with gdpo"):
        methods.advantages("grpo+mrtpo", b)
    with pytest.raises(ValueError, match="needs the output of the 'replay' pass"):
        methods.advantages("mrtpo", _batch(None))


# --- replay prompts ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tools_example():
    from tasks import TRAIN_SETS

    return TRAIN_SETS.get("tools-synth").load(None, 0)[0]


@pytest.fixture(scope="module")
def tokenizer():
    from harness.models import load_tokenizer

    return load_tokenizer("tiny-random")


def _render(tok, messages):
    return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


@pytest.mark.model
def test_replay_prompts_hold_exactly_the_intended_texts(tools_example, tokenizer):
    fmt = tools_example.info_for("format").text
    gold = tools_example.info_for("correctness").text
    plain = _render(tokenizer, list(tools_example.messages))
    assert fmt in plain and gold not in plain  # the format spec is in the prompt, the gold is not
    everything = _render(tokenizer, replay_messages(tools_example, {"format", "correctness"}))
    without_format = _render(tokenizer, replay_messages(tools_example, {"correctness"}))
    without_gold = _render(tokenizer, replay_messages(tools_example, {"format"}))
    nothing = _render(tokenizer, replay_messages(tools_example, set()))
    assert fmt in everything and gold in everything
    assert fmt not in without_format and gold in without_format
    assert fmt in without_gold and gold not in without_gold and without_gold == plain
    assert fmt not in nothing and gold not in nothing
    with pytest.raises(KeyError):
        replay_messages(tools_example, {"no-such-reward"})


def test_in_prompt_text_that_is_missing_is_an_error():
    from tasks.base import Example, VerifierInfo

    ex = Example(id="x", messages=({"role": "user", "content": "hello"},), reference="",
                 verifier_info=(VerifierInfo("r", "not in the prompt", False),))
    with pytest.raises(ValueError, match="does not occur verbatim"):
        replay_messages(ex, set())


# --- the engine on real models ---------------------------------------------------------------
@pytest.mark.model
def test_joint_gives_every_reward_the_same_profile(tools_example, tokenizer):
    from harness.models import load_model

    model = load_model("tiny-random")
    ids = torch.tensor([tokenizer("<think> ok </think>", add_special_tokens=False)["input_ids"]])
    mask = torch.ones_like(ids)
    d = relevance(model, tokenizer, [tools_example], ids, mask, ["format", "correctness"],
                  mode="joint")
    assert torch.equal(d[:, 0], d[:, 1]) and d.abs().sum() > 0
    loo = relevance(model, tokenizer, [tools_example], ids, mask, ["format", "correctness"])
    assert not torch.equal(loo[:, 0], loo[:, 1])


@pytest.mark.model
def test_planted_signal_copied_token_is_most_relevant():
    """SmolLM2 copies a code word that only the privileged verifier text holds: the replay
    distance of that reward peaks inside the code word, the other reward's does not care."""
    from harness.models import load_model, load_tokenizer
    from tasks.base import Example, VerifierInfo

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
    d = relevance(model, tok, [ex], ids, torch.ones_like(ids), ["style", "code"], mode="loo")
    span = range(len(before), len(before) + len(code))
    assert int(d[0, 1].argmax()) in span
    inside = d[0, 1, span.start:span.stop].mean()
    outside = torch.cat([d[0, 1, :span.start], d[0, 1, span.stop:]]).mean()
    assert inside > 3 * outside


# --- CoRT ----------------------------------------------------------------------------------
def test_cort_weights_hand_computed():
    from methods.cort import cort_token_weights, smoothstep

    delta = torch.tensor([[0.5, -1.0, 3.0, 0.7], [-0.2, -0.1, 0.0, 0.0]])
    mask = _mask([3, 4], 4)
    # response 0: clip(delta, 0, 2) on 3 tokens = [0.5, 0, 2] (mean 5/6) -> [0.6, 0, 2.4]
    # response 1: all clipped to 0: mean 0 -> weights 1
    full = cort_token_weights(delta, mask, 2.0, "clip", ramp=1.0)
    assert torch.allclose(full, torch.tensor([[0.6, 0.0, 2.4, 0.0], [1.0, 1.0, 1.0, 1.0]]))
    # halfway through the ramp: s(0.5) = 0.5 -> 1 + 0.5 (w - 1)
    assert smoothstep(0.5) == 0.5 and smoothstep(0.0) == 0.0 and smoothstep(2.0) == 1.0
    half = cort_token_weights(delta, mask, 2.0, "clip", ramp=0.5)
    assert torch.allclose(half[0, :3], torch.tensor([0.8, 0.5, 1.7]))


def test_cort_is_grpo_times_token_weights():
    b = RolloutBatch(rewards=torch.tensor([[1.0, 3.0], [0.0, -3.0]]), reward_names=("a", "b"),
                     reward_bounds=((0.0, 1.0), (-3.0, 3.0)), group=torch.tensor([0, 0]),
                     response_mask=_mask([2, 2], 2),
                     passes={"counterfactual": torch.tensor([[[1.0, 0.0]], [[0.5, 0.5]]])},
                     step=10, total_steps=10)
    grpo = methods.advantages("grpo", b)
    cort = methods.advantages("cort", b)
    # ramp complete: response 0 weights [2, 0], response 1 [1, 1]
    assert torch.allclose(cort, grpo * torch.tensor([[2.0, 0.0], [1.0, 1.0]]))
    # at step 0 the ramp is 0: CoRT is GRPO
    b0 = RolloutBatch(**{**b.__dict__, "step": 0})
    assert torch.allclose(methods.advantages("cort", b0), grpo)


@pytest.mark.model
def test_contrast_is_zero_when_no_text_is_removed(tokenizer):
    from harness.models import load_model
    from tasks.base import Example, VerifierInfo

    model = load_model("tiny-random")
    ex = Example(id="c", messages=({"role": "user", "content": "Say hi. Be brief."},),
                 reference="", verifier_info=(VerifierInfo("brief", "Be brief.", False),))
    privileged_only = Example(id="d", messages=ex.messages, reference="",
                              verifier_info=(VerifierInfo("gold", "hi", True),))
    ids = torch.tensor([tokenizer("hi there", add_special_tokens=False)["input_ids"]] * 2)
    mask = torch.ones_like(ids)
    d = contrast(model, tokenizer, [ex, privileged_only], ids, mask)
    assert d[0].abs().sum() > 0  # the constraint was removed: log-likelihoods move
    assert d[1].abs().max() < 1e-5  # nothing in the prompt to remove: the same context


# --- OPSD ----------------------------------------------------------------------------------
def test_generalised_jsd_zero_for_identical_contexts_and_symmetric_formula():
    from methods.opsd import generalised_jsd

    g = torch.Generator().manual_seed(4)
    head = torch.nn.Linear(8, 30, bias=False)
    h = torch.randn(2, 9, 8, generator=g)
    same = generalised_jsd(head(h), h, head, temperature=0.7, chunk=4)
    assert same.abs().max() < 1e-6  # teacher and student read the same context
    h2 = torch.randn(2, 9, 8, generator=g)
    d = generalised_jsd(head(h), h2, head, temperature=1.0, beta=0.5, chunk=4)
    # beta = 0.5 is the Jensen-Shannon divergence: the square of the JS distance
    ref = js_from_logprobs(torch.log_softmax(head(h), -1), torch.log_softmax(head(h2), -1)) ** 2
    assert torch.allclose(d, ref, atol=1e-6)
    assert torch.allclose(generalised_jsd(head(h), h2, head, chunk=100), d, atol=1e-6)


def test_opsd_alone_has_no_reward_term_and_composes_with_grpo():
    b = _batch(None)
    assert torch.all(methods.advantages("opsd", b) == 0)
    assert torch.equal(methods.advantages("opsd+grpo", b), methods.advantages("grpo", b))
    assert methods.get("opsd+grpo").needs == ("teacher",)
    # any method with a reward term keeps it: opsd+saw is SAW's advantages plus distillation
    assert torch.equal(methods.advantages("opsd+saw", b), methods.advantages("saw", b))
    assert methods.get("opsd+saw").loss_terms == methods.get("opsd").loss_terms


# --- diagnostics ---------------------------------------------------------------------------
@pytest.mark.model
def test_diagnostics_on_a_planted_profile(tokenizer):
    from methods.mrtpo.diagnostics import batch_records, summarise
    from tasks import TASKS
    from tasks.base import Example

    text = '<think> call it </think>\n<tool_call>\n{"name": "f", "parameters": {}}\n</tool_call>'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    t = len(ids)
    from methods.mrtpo.diagnostics import token_char_spans, token_mask
    from tasks.tools.spans import spans

    joined, ranges = token_char_spans(tokenizer, ids)
    assert joined == text
    sp = spans(None, joined)
    call_tokens = token_mask(ranges, sp["correctness"])
    tag_tokens = token_mask(ranges, sp["format"])
    # correctness' distance all on the call's tokens, format's spread uniformly
    d = torch.zeros(1, 2, t)
    d[0, 1, call_tokens] = 1.0
    d[0, 0] = 1.0
    ex = Example(id="x", messages=(), reference="")
    records = batch_records(tokenizer, [ex], torch.tensor([ids]), torch.ones(1, t, dtype=torch.long),
                            d, ["format", "correctness"], TASKS.get("bfcl").spans)
    m = summarise(records)
    share = float(call_tokens.sum()) / t
    assert m["diag/correctness/span_ratio"] == pytest.approx(1 / share)  # all of it on the span
    assert m["diag/format/span_ratio"] == pytest.approx(1.0)  # uniform: ratio 1
    assert m["diag/correctness/part/answer"] == pytest.approx(1.0)
    assert m["diag/format/part/tags"] == pytest.approx(float(tag_tokens.sum()) / t)
    assert m["diag/format/top10"] == pytest.approx(math.ceil(0.1 * t) / t)


def test_kept_share_is_one_minus_beta_times_the_profiles_total_variation():
    from methods.mrtpo import kept_share

    d = torch.tensor([[[0.0, 0.0, 1.0, 3.0, 9.0]]])  # one response, one reward, T = 4 + pad
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    # rho = d / mean = (0, 0, 1, 3); TV(rho / 4, uniform) = (0.25 + 0.25 + 0 + 0.5) / 2 = 0.5
    for beta, kept in ((0.0, 1.0), (0.5, 0.75), (1.0, 0.5)):
        w = mrtpo_token_weights(d, mask, beta=beta)
        assert float(kept_share(w, mask)[0, 0]) == pytest.approx(kept)
    # by hand at beta 0.5: w = (0.5, 0.5, 1, 2), p = (1/8, 1/8, 1/4, 1/2), sum min(p, 1/4)
    assert 1 / 8 + 1 / 8 + 1 / 4 + 1 / 4 == 0.75
