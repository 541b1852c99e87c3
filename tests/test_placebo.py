"""The text controls of ``bench localisation``: a placebo of the same length with none of the
batch's verifier tokens, an order control with all of them, and on a model that reads its
verifier text, a placebo span ratio that covers 1 where the real one does not."""
import dataclasses

import pytest
import torch

from lab.bench import localisation as loc
from lab.bench.placebo import control_context, control_examples, placebo_texts
from tasks.base import Example, VerifierInfo

WORDS = ["pad", "the", "a", "of", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
         "answer", "is", "format"]
SOURCE = [" " + w for w in WORDS]  # the placebo's words: here, any word of the vocabulary


class WordTokenizer:
    """One token per space-separated word of ``WORDS``."""

    def encode(self, text, add_special_tokens=False):
        return [WORDS.index(w) for w in text.split()]

    def decode(self, ids):
        return " ".join(WORDS[i] for i in ids)


def example(k: int) -> Example:
    gold = WORDS[4 + k]
    return Example(id=f"p{k}", messages=({"role": "user", "content": "format the answer"},),
                   reference=gold, verifier_info=(
                       VerifierInfo("name", f"{gold} {gold}", privileged=True),
                       VerifierInfo("format", "format", privileged=False)))


def test_a_placebo_has_the_same_length_and_none_of_the_batchs_verifier_words():
    tok, batch = WordTokenizer(), [example(k) for k in range(3)]
    banned = {"alpha", "bravo", "charlie", "format"}  # every verifier text's words, all rewards
    texts = placebo_texts(batch, tok, seed=0, source=SOURCE)
    for ex in batch:
        for info in ex.verifier_info:
            fake = texts[(ex.id, info.text)]
            assert len(tok.encode(fake)) == len(tok.encode(info.text))
            assert not set(fake.split()) & banned  # not even another prompt's answer
    # in the prompt too (the replay cuts it there); the per-reward overlap is 0
    placebo, overlap = control_examples(batch, tok, seed=0, source=SOURCE)
    assert placebo[0].info_for("format").text not in banned
    assert placebo[0].messages[0]["content"].split()[1:] == ["the", "answer"]
    assert [e.id for e in placebo] == [e.id for e in batch]
    assert overlap == {"name": 0.0, "format": 0.0}


def test_the_order_control_keeps_every_verifier_token():
    tok = WordTokenizer()
    batch = [dataclasses.replace(example(0), verifier_info=(
        VerifierInfo("name", "alpha is the answer", privileged=True),))]
    order, overlap = control_examples(batch, tok, seed=1, kind="order")
    text = order[0].info_for("name").text
    assert sorted(text.split()) == sorted("alpha is the answer".split())
    assert overlap == {"name": 1.0}
    with pytest.raises(ValueError, match="unknown text control"):
        placebo_texts(batch, tok, kind="scrambled")


def test_an_order_text_with_no_other_order_scores_zero():
    tok = WordTokenizer()
    batch = [dataclasses.replace(example(0), verifier_info=(
        VerifierInfo("name", "alpha", privileged=True),
        VerifierInfo("format", "the the", privileged=False)))]
    order, kept = control_examples(batch, tok, seed=0, kind="order")
    assert order[0].info_for("name").text == "alpha"  # the text itself: no control made
    assert kept == {"name": 0.0, "format": 0.0}


def test_no_word_left_outside_the_verifier_texts_is_a_clear_error():
    tok, batch = WordTokenizer(), [example(0)]
    with pytest.raises(ValueError, match="no words left outside"):
        placebo_texts(batch, tok, source=[" alpha", " format"])


@pytest.mark.model
def test_a_real_tokenizers_placebo_shares_no_token_after_encoding_again():
    """SmolLM2's BPE: a format spec with its tags and fences and SQL gold queries; each
    placebo, decoded and encoded again, holds none of their tokens."""
    from harness.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    spec = "Reply as <think>...</think> then <answer>```sql\nSELECT ...\n```</answer>."
    batch = [Example(id=f"q{k}", reference=q, messages=({"role": "user", "content":
                                                         f"Question {k}. {spec}"},),
                     verifier_info=(VerifierInfo("format", spec, False),
                                    VerifierInfo("execution", q, True)))
             for k, q in enumerate(["SELECT name FROM singer WHERE age > 30",
                                    "SELECT count(*) FROM concert GROUP BY year"])]
    made, overlap = control_examples(batch, tok, seed=0)
    assert overlap == {"format": 0.0, "execution": 0.0}
    for ex, real in zip(made, batch):
        for a, b in zip(ex.verifier_info, real.verifier_info):
            assert len(tok.encode(a.text, add_special_tokens=False)) == \
                len(tok.encode(b.text, add_special_tokens=False))
    assert spec not in made[0].messages[0]["content"]


@pytest.mark.model
def test_a_real_tokenizers_order_text_keeps_every_token_after_encoding_again():
    """SmolLM2's BPE merges across some joins of reordered words (a space run before a newline,
    a first word without its space): the order text is another order of the words whose
    encoding has exactly the verifier text's tokens, each as often."""
    from collections import Counter

    from harness.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    schema = ("CREATE TABLE authors (\n  author_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL"
              ",\n  birth_year INTEGER\n);\n\nCREATE TABLE books (\n  book_id INTEGER,\n  "
              "FOREIGN KEY (author_id) REFERENCES authors(author_id)\n);")
    batch = [Example(id="q", reference="", messages=({"role": "user", "content": schema},),
                     verifier_info=(VerifierInfo("executable", schema, False),
                                    VerifierInfo("format", "<think>...</think> <answer>", True)))]
    made, kept = control_examples(batch, tok, seed=3, kind="order")
    assert kept == {"executable": 1.0, "format": 1.0}
    for a, b in zip(made[0].verifier_info, batch[0].verifier_info):
        assert a.text != b.text
        assert Counter(tok.encode(a.text, add_special_tokens=False)) == \
            Counter(tok.encode(b.text, add_special_tokens=False))
    assert made[0].messages[0]["content"] == made[0].info_for("executable").text


class CopyContext:
    """A model that reads its verifier text: the next-token distribution of response token t is
    peaked on that token when its word is in the context, flat otherwise (head: identity)."""

    def __init__(self, examples, responses):
        self.examples = examples
        self.response_ids = torch.tensor(responses)
        self.response_mask = torch.ones_like(self.response_ids)
        self.reward_names = ("name",)
        self.signal = torch.ones(len(examples), 1, dtype=torch.bool)
        self.batch_size, self.temperature = 64, 1.0
        self.tokenizer = WordTokenizer()

    def head(self):
        return torch.nn.Identity()

    def hidden_variants(self, variants, rows):
        out = []
        for contexts in variants:
            h = torch.zeros(len(rows), self.response_ids.shape[1], len(WORDS))
            for i, (row, messages) in enumerate(zip(rows, contexts)):
                text = " ".join(m["content"] for m in messages or [])
                for t, tok in enumerate(self.response_ids[row].tolist()):
                    if WORDS[tok] in text.split():
                        h[i, t, tok] = 6.0
            out.append(h)
        return out


def span_ratios(ctx, weights):
    """Per response: the profile's share on the gold word's tokens over their token share."""
    out = []
    for i, ex in enumerate(ctx.examples):
        ids = ctx.response_ids[i]
        span = ids == WORDS.index(ex.reference)
        w = weights[i, 0]
        out.append(float(w[span].sum() / w.sum()) / float(span.float().mean()))
    return out


def test_the_placebo_covers_one_where_the_real_replay_localises():
    from methods.mrtpo import mrtpo_token_weights, relevance
    from methods.mrtpo import MrtpoOptions

    batch, responses = [], []
    for k in range(6):
        for g in range(4):  # a group of 4 responses per prompt: the answer at different places
            batch.append(example(k))
            r = [1, 2, 3, 1, 2, 3, 1, 2]
            r[(g + k) % 8] = 4 + k
            responses.append(r)
    ctx = CopyContext(batch, responses)
    options = dataclasses.replace(MrtpoOptions(), mrtpo_replay="loo", mrtpo_replay_all=True)

    def ratio(c):
        d = relevance(c, options)
        values = span_ratios(c, mrtpo_token_weights(d, c.response_mask, 1.0))
        return loc.interval(values, clusters=[e.id for e in c.examples])

    mean, low, high = ratio(ctx)
    assert low > 1.0 and mean == pytest.approx(8.0, rel=1e-3)  # all credit on 1 of 8 tokens
    # the placebo's words: none of the responses' (this model would copy them)
    placebo = control_context(ctx, seed=0, source=[" pad", " answer", " is"])
    assert placebo.response_ids is ctx.response_ids  # the same responses
    mean, low, high = ratio(placebo)
    assert low <= 1.0 <= high and mean == pytest.approx(1.0)


def test_prompt_clustered_intervals_use_the_prompts_means():
    """Five prompts' responses, 3 of the first: the interval is over the 5 prompt means
    (Student t below loc.SMALL prompts), not over 7 responses."""
    from scipy import stats

    mean, low, high = loc.interval([1.0, 1.0, 1.0, 3.0, 2.0, 4.0, 5.0],
                                   clusters=["a", "a", "a", "b", "c", "d", "e"])
    means = [1.0, 3.0, 2.0, 4.0, 5.0]
    half = stats.t.ppf(0.975, 4) * stats.tstd(means) / 5 ** 0.5
    assert mean == pytest.approx(3.0)
    assert (low, high) == pytest.approx((3.0 - half, 3.0 + half))
