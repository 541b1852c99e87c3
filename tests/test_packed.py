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

