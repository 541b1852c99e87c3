"""Shared-prompt packing gives the same log-probs and gradients as one row per response."""
import torch

from harness.packed import pack
from harness.rollouts import Rollout, left_pad


def _rollout():
    prompts = [[5, 6, 7, 8, 9], [11, 12, 13]]
    responses = [[20, 21, 22, 2], [23, 24, 2, 0], [25, 2, 0, 0],   # prompt 0; 2 = EOS, 0 = pad
                 [26, 27, 28, 29], [30, 2, 0, 0], [31, 32, 2, 0]]  # prompt 1
    lengths = [4, 3, 2, 4, 2, 3]
    rows = [0, 0, 0, 1, 1, 1]
    p_ids, p_mask = left_pad([prompts[r] for r in rows], 0)
    r_ids = torch.tensor(responses)
    r_mask = (torch.arange(4)[None] < torch.tensor(lengths)[:, None]).long()
    return Rollout(p_ids, p_mask, r_ids, r_mask, [""] * 6, rows)


def test_mask_lets_each_response_see_the_prompt_and_itself_only():
    ro = _rollout()
    packed = pack(ro.prompt_ids[:3], ro.prompt_mask[:3], ro.response_ids[:3],
                  ro.response_mask[:3], [0, 0, 0], pad_id=0)
    assert packed.ids.tolist() == [[5, 6, 7, 8, 9, 20, 21, 22, 2, 23, 24, 2, 25, 2]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 5, 6]]
    seen = packed.mask[0, 0] == 0
    # response 2's first token (position 9) sees the prompt (0-4) and itself, not response 1
    assert seen[9].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 9]
    assert seen[13].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 12, 13]
    # token 0 of every response is predicted by the last prompt token (position 4)
    assert [packed.keep[i].tolist()[0] for i in packed.logit_index] == [4, 4, 4]


def test_packed_logprobs_and_gradients_equal_unpacked():
    from harness.models import load_model
    from harness.train.logprobs import sequence_logprobs

    model = load_model("tiny-random", seed=1)
    ro = _rollout()
    rows = [0, 1, 2, 3, 4, 5]
    grads = []
    values = []
    for pack_rows in (False, True):
        model.zero_grad()
        logp, logits = sequence_logprobs(model, ro, rows, 0.7, True, pack=pack_rows, pad_id=0)
        mask = ro.response_mask.bool()
        (torch.where(mask, logp, torch.zeros_like(logp)).sum()).backward()
        values.append(torch.where(mask, logp, torch.zeros_like(logp)))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert torch.allclose(values[0], values[1], atol=1e-5)
    assert values[0].abs().sum() > 0
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5, rtol=1e-4), name


def test_shared_prefill_samples_the_same_responses():
    """Generation computes each prompt's cache once for its G samples: same samples, same
    seed, as G separate prefills."""
    from harness.models import load_model, load_tokenizer
    from harness.rollouts import HFRollout
    from tasks.tools.synth import generate

    tok = load_tokenizer("tiny-random")
    rollout = HFRollout(load_model("tiny-random", seed=2), tok)
    examples = generate(3, 0)
    a = rollout.generate(examples, 4, 10, seed=11, share_prefill=False)
    b = rollout.generate(examples, 4, 10, seed=11, share_prefill=True)
    assert torch.equal(a.prompt_ids, b.prompt_ids)
    assert torch.equal(a.response_ids, b.response_ids) and a.texts == b.texts
    assert len(set(a.texts)) > 1  # sampled, not one repeated answer


def test_replay_hidden_states_are_the_same_packed():
    """MRTPO / CoRT / OPSD replays pack rows that share a context; the states that predict
    each response token are unchanged."""
    from harness.models import load_model, load_tokenizer
    from harness.replay import response_hidden
    from tasks.tools.synth import generate

    tok = load_tokenizer("tiny-random")
    model = load_model("tiny-random", seed=4)
    examples = generate(2, 0)
    contexts = [list(examples[i].messages) for i in (0, 0, 0, 1, 1)]
    ro = _rollout()
    ids, mask = ro.response_ids[:5], ro.response_mask[:5]
    a = response_hidden(model, tok, contexts, ids, mask, pack=False)
    b = response_hidden(model, tok, contexts, ids, mask, pack=True)
    valid = mask.bool()
    assert a.shape == b.shape
    assert torch.allclose(a[valid], b[valid], atol=1e-5)
    assert (b[~valid] == 0).all()



def test_replay_variants_share_their_prompt_and_equal_separate_rows():
    """K + 1 replay contexts of a group (one with a verifier text cut from the middle of the
    prompt, one with a text appended) are computed from one forward of their common beginning;
    each (context, response) state equals the one a separate left-padded row gives."""
    from harness.models import load_model, load_tokenizer
    from harness.replay import PolicyContext, response_hidden, response_hidden_variants
    from tasks.tools.synth import generate

    tok = load_tokenizer("tiny-random")
    model = load_model("tiny-random", seed=4)
    examples = generate(2, 0)
    rows = [0, 0, 0, 1, 1]
    base = [list(examples[i].messages) for i in rows]
    cut = [[dict(m) for m in c] for c in base]
    for c in cut:  # a text cut from the middle of the user turn
        words = c[-1]["content"].split(" ")
        c[-1]["content"] = " ".join(words[:3] + words[6:])
    appended = [[*c[:-1], {**c[-1], "content": c[-1]["content"] + "\n\n[Reference] x = 1"}]
                for c in base]
    ro = _rollout()
    ids, mask = ro.response_ids[:5], ro.response_mask[:5]
    variants = [base, cut, appended]
    got = response_hidden_variants(model, tok, variants, ids, mask, families=rows)
    valid = mask.bool()
    for contexts, h in zip(variants, got):
        want = response_hidden(model, tok, contexts, ids, mask, pack=False)
        assert h.shape == want.shape
        assert torch.allclose(h[valid], want[valid], atol=1e-5)
        assert (h[~valid] == 0).all()
    assert not torch.allclose(got[0][valid], got[1][valid], atol=1e-3)  # the cut mattered
    # the policy context computes them together, by prompt group
    ctx = PolicyContext.of(model, tok, [examples[i] for i in rows], ids, mask, ["a"])
    ctx.group = torch.tensor(rows)
    together = ctx.hidden_variants(variants, range(5))
    assert all(torch.allclose(a[valid], b[valid], atol=1e-5) for a, b in zip(together, got))


def test_mrtpo_replay_equals_one_context_at_a_time():
    """MRTPO's distances from the shared-prompt replay equal those from K + 1 separate
    left-padded forwards (the reference), for every replay mode."""
    from harness.models import load_model, load_tokenizer
    from harness.replay import PolicyContext, response_hidden
    from methods.contexts import known_rewards, replay_messages
    from methods.mrtpo import MrtpoOptions, relevance
    from methods.tokens import js_distance
    from tasks.tools.rewards import REWARDS
    from tasks.tools.synth import generate

    tok = load_tokenizer("tiny-random")
    model = load_model("tiny-random", seed=5)
    examples = generate(2, 0)
    names = tuple(r.name for r in REWARDS)  # format (in the prompt), correctness (appended)
    rows = [0, 0, 0, 1, 1, 1]
    ex = [examples[i] for i in rows]
    ro = _rollout()
    ids, mask = ro.response_ids, ro.response_mask
    ctx = PolicyContext.of(model, tok, ex, ids, mask, names, temperature=0.7, batch_size=3)
    ctx.group = torch.tensor(rows)
    head = model.get_output_embeddings()
    for mode in ("loo", "single", "joint"):
        got = relevance(ctx, MrtpoOptions(mrtpo_replay=mode))
        want = torch.zeros_like(got)
        for k, name in enumerate(names):
            if mode == "joint":
                a = [replay_messages(e, known_rewards(e)) for e in ex]
                b = [replay_messages(e, frozenset()) for e in ex]
            elif mode == "loo":
                a = [replay_messages(e, known_rewards(e)) for e in ex]
                b = [replay_messages(e, known_rewards(e) - {name}) for e in ex]
            else:
                a = [replay_messages(e, frozenset()) for e in ex]
                b = [replay_messages(e, known_rewards(e) & {name}) for e in ex]
            ha = response_hidden(model, tok, a, ids, mask, pack=False)
            hb = response_hidden(model, tok, b, ids, mask, pack=False)
            want[:, k] = js_distance(ha, hb, head, 0.7, 128) * mask
        assert torch.allclose(got, want, atol=1e-4), mode
        assert got.abs().sum() > 0


def test_mrtpo_skips_pairs_without_signal_and_its_advantages_do_not_change():
    """A (response, reward) pair whose reward is constant in its group is not replayed (NaN),
    the replayed pairs' distances equal the full replay's, and MRTPO's advantages equal those
    from replaying every pair, in every replay mode."""
    import methods
    from harness.models import load_model, load_tokenizer
    from harness.replay import PolicyContext
    from methods.batch import RolloutBatch
    from methods.mrtpo import relevance
    from methods.stats import within_group_signal
    from tasks.tools.rewards import REWARDS
    from tasks.tools.synth import generate

    tok = load_tokenizer("tiny-random")
    model = load_model("tiny-random", seed=5)
    examples = generate(2, 0)
    names = tuple(r.name for r in REWARDS)
    rows = [0, 0, 0, 1, 1, 1]
    ro = _rollout()
    # group 0: format constant, correctness varies; group 1: both constant (no replay at all)
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.5],
                            [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    group = torch.tensor(rows)
    signal = within_group_signal(rewards, group)
    assert signal.tolist() == [[False, True]] * 3 + [[False, False]] * 3
    for mode in ("loo", "single", "joint"):
        outs = {}
        for replay_all in (False, True):
            ctx = PolicyContext.of(model, tok, [examples[i] for i in rows], ro.response_ids,
                                   ro.response_mask, names, temperature=0.7, batch_size=3,
                                   rewards=rewards)
            ctx.group, ctx.signal = group, signal
            opts = methods.options(mrtpo_replay=mode, mrtpo_replay_all=replay_all)
            d = relevance(ctx, opts)
            batch = RolloutBatch(rewards=rewards, reward_names=names,
                                 reward_bounds=((0.0, 1.0),) * 2, group=group,
                                 response_mask=ro.response_mask, passes={"replay": d})
            outs[replay_all] = d, methods.compute("mrtpo", batch, opts).scores
        (skipped, adv), (full, adv_all) = outs[False], outs[True]
        assert torch.isnan(skipped[~signal]).all() and not torch.isnan(full).any(), mode
        assert torch.allclose(skipped[signal], full[signal], atol=1e-5), mode
        assert full[signal].abs().sum() > 0, mode
        # equal up to the float rounding of other batch shapes (distances ~1e-6 apart, which
        # rho's division and the whitening magnify to ~1e-4)
        assert torch.allclose(adv, adv_all, atol=1e-3) and adv.abs().sum() > 0, mode
