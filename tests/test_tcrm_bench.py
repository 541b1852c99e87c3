"""``bench tcrm``'s parts (stored rollouts, held-out pair accuracy) and TCRM in ``bench
localisation`` (its variants and its profile)."""
import json

import pytest
import torch

from lab.bench import localisation
from lab.bench import tcrm as bench
from lab.bench import tcrm_profile
from methods.tcrm import online


def _rows():
    rows = []
    for p in range(2):
        for i in range(3):
            rows.append({"prompt": f"0:{p}", "id": f"x{p}",
                         "messages": [{"role": "user", "content": f"q{p}"}],
                         "response_ids": [5 + i, 6, 7, 8][:2 + i],
                         "rewards": {"a": float(i == 0), "b": None}})
    return rows


def test_rollouts_file_round_trip_and_malformed_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()) + "\n")
    assert bench.read_rollouts(str(path)) == _rows()
    path.write_text(json.dumps(_rows()[0]) + "\n{\"prompt\": 1}\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: not a rollout row"):
        bench.read_rollouts(str(path))
    path.write_text("\n")
    with pytest.raises(ValueError, match="no rollouts"):
        bench.read_rollouts(str(path))


def test_held_out_pair_hits_by_hand():
    from harness.models import load_tokenizer

    data = bench.to_rollouts(_rows(), load_tokenizer("tiny-random"), ["a", "b"])
    assert data.group.tolist() == [0, 0, 0, 1, 1, 1]
    assert data.response_mask.sum(dim=1).tolist() == [2, 3, 4] * 2
    assert torch.isnan(data.rewards[:, 1]).all()
    # values [6, 2, 5]: column 0 is the prompt; finals at columns 2, 3, 4, middles at 1, 2, 2
    v = torch.zeros(6, 2, 5)
    v[0, 0] = torch.tensor([0, 1.0, 0.2, 0, 0])  # preferred: middle 1.0, final 0.2
    v[1, 0] = torch.tensor([0, 0, 0.5, 0.9, 0])  # middle 0.5, final 0.9
    v[2, 0] = torch.tensor([0, 0, 0.0, 0, 0.1])  # middle 0.0, final 0.1
    v[3:] = v[:3]
    hits = online.pair_hits(v, data, ["a", "b"])
    # pairs (0, 1), (0, 2) per prompt: final 0.2 < 0.9, 0.2 > 0.1; middle 1.0 > 0.5, 1.0 > 0
    assert hits["a"]["final"] == [0.0, 1.0] * 2 and hits["a"]["middle"] == [1.0] * 4
    assert hits["b"]["prompt"] == []
    got = bench.measure(hits, 0)
    assert got["a"]["pairs"] == 4 and got["a"]["final"]["mean"] == 0.5
    assert got["all"]["middle"]["mean"] == 1.0 and "b" not in got


def test_tcrm_variants_in_the_localisation_bench():
    assert localisation.parse_variant("tcrm") == ("tcrm", "aligned", "")
    assert localisation.parse_variant("tcrm@abs") == ("tcrm", "abs", "")
    assert localisation.parse_variant("tcrm@shuffled") == ("tcrm", "aligned", "shuffled")
    assert localisation.parse_variant("tcrm@swapped") == ("tcrm", "aligned", "swapped")
    assert localisation.parse_variant("tcrm@cross") == ("tcrm", "aligned", "cross")
    for text_control in ("placebo", "order"):
        with pytest.raises(ValueError, match=f"no @{text_control}"):
            localisation.parse_variant(f"tcrm@{text_control}")
    with pytest.raises(ValueError, match="tcrm takes"):
        localisation.parse_variant("tcrm@joint")


@pytest.mark.model
def test_tcrm_profile_is_the_allocation_shape_and_skips_pairs_without_advantage():
    import methods
    from harness.models import load_model, load_tokenizer
    from harness.replay import PolicyContext
    from tasks.base import Example

    model, tok = load_model("tiny-random", seed=3), load_tokenizer("tiny-random")
    ids = torch.randint(20, 300, (4, 5), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    ex = [Example(id="p", messages=({"role": "user", "content": "q"},), reference=None)] * 4
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    ctx = PolicyContext.of(model, tok, ex, ids, mask, ["a", "b"], rewards=rewards)
    raw, to_weights = tcrm_profile.profile(ctx, methods.options(tcrm_epochs=1), "aligned")
    assert raw.shape == (4, 2, 5)
    w = to_weights(raw, False, 0)
    assert torch.isnan(w[:, 1]).all()  # reward b is constant in the group: no advantage
    assert torch.allclose(w[:, 0].mean(dim=-1), torch.ones(4), atol=1e-5)


def test_the_outcomes_control_shuffles_whole_reward_rows_within_groups():
    """TCRM's @outcomes: each group's reward rows permuted among its responses (all rewards of
    a response move together, no row leaves its group), the tokens and the context's other
    fields untouched; only a learned source takes it."""
    import types

    import torch

    from lab.bench.tcrm_profile import shuffled_outcomes

    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0],
                            [5.0, 6.0], [7.0, 8.0]])
    ctx = types.SimpleNamespace(rewards=rewards, group=torch.tensor([0, 0, 0, 0, 1, 1]),
                                response_ids=torch.zeros(6, 3), state={"kept": 1})
    out = shuffled_outcomes(ctx, seed=0)
    assert out.response_ids is ctx.response_ids and out.state == {} and ctx.state == {"kept": 1}
    assert torch.equal(ctx.rewards, rewards)  # the real outcomes are not touched
    for group in (slice(0, 4), slice(4, 6)):
        got = sorted(map(tuple, out.rewards[group].tolist()))
        assert got == sorted(map(tuple, rewards[group].tolist()))
    assert not torch.equal(out.rewards, rewards)  # seed 0 moves at least one row
    assert torch.equal(shuffled_outcomes(ctx, seed=0).rewards, out.rewards)  # seeded
    assert localisation.parse_variant("tcrm@outcomes") == ("tcrm", "aligned", "outcomes")
    with pytest.raises(ValueError, match="learns nothing from outcomes"):
        localisation.parse_variant("mrtpo@outcomes")
    from lab.bench.localisation_report import reference_variants

    assert "copy-model@outcomes" not in reference_variants("copy-model", ["tcrm@outcomes"])
