"""The methods as TRL's GRPOTrainer advantages (harness/integrations/trl.py): on one batch TRL
generated and scored, the advantages the adapter hands TRL equal the harness's own computation
for every built-in method, a composed one and a plugin one (so dropping a reward, a group or a
pass fails here); a real two-step GRPOTrainer run trains through it."""
from pathlib import Path

import pytest
import torch

import methods
from harness import plugins
from harness.integrations import trl as adapter

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "plugins" / "toy_task.py"
PLUGIN = ROOT / "docs" / "examples" / "half_format.py"  # a plugin method: a reward weighting


def _load(path: Path) -> None:
    from harness.plugins import load_plugins

    load_plugins([str(path)])  # once per process, as a run loads it


# the launcher variables the in-process path (harness.engine.init_single_process) leaves in the
# environment: transformers' TrainingArguments would read LOCAL_RANK as a distributed launch
LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT")


@pytest.fixture(autouse=True)
def _plain_process(monkeypatch):
    for key in LAUNCH_ENV:
        monkeypatch.delenv(key, raising=False)


def _trainer(tmp_path, method="gdpo", steps=1, model="tiny-random", **options):
    pytest.importorskip("trl", reason="the trl extra: pip install -e '.[trl]'")
    from trl import GRPOConfig

    from harness.models import load_model, load_tokenizer
    from tasks import TASKS, TRAIN_SETS

    _load(TOY)
    task = TASKS.get("toy")
    examples = TRAIN_SETS.get("toy-train").load(None, 0)[:4]
    tok = load_tokenizer(model)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8,
                      gradient_accumulation_steps=1, num_generations=4,
                      max_completion_length=8, max_steps=steps, learning_rate=1e-3,
                      use_cpu=True, bf16=False, report_to=[], save_strategy="no",
                      logging_steps=1, disable_tqdm=True, seed=0, beta=0.0)
    return adapter.MethodGRPOTrainer(
        model=load_model(model, seed=3), args=args, train_dataset=adapter.dataset(examples),
        processing_class=tok, reward_funcs=adapter.reward_functions(task, {e.id: e for e in
                                                                           examples}),
        method=method, method_options=methods.options(**options),
        examples={e.id: e for e in examples}, reward_bounds=[(rw.lo, rw.hi) for rw in
                                                             task.rewards])


def test_the_batch_is_trl_s_rows_in_groups():
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    b = adapter.batch_of(r, [3, 1, 2, 2], 2, ["a", "b"], [(0, 1), (0, 1)])
    assert b.group.tolist() == [0, 0, 1, 1]
    assert b.response_mask.sum(dim=1).tolist() == [3, 1, 2, 2]
    b = adapter.batch_of(r, [3, 1, 2, 2], 2, ["a", "b"], [(0, 1), (0, 1)], step=3,
                         total_steps=10)
    assert (b.step, b.total_steps) == (3, 10)  # CoRT's warm-up reads them
    with pytest.raises(ValueError, match="whole groups"):
        adapter.batch_of(r[:3], [1, 1, 1], 2, ["a", "b"], [(0, 1), (0, 1)])


@pytest.mark.slow
def test_adapter_advantages_equal_the_harness_for_every_method(tmp_path):
    """One batch generated and scored by TRL; for each method, the adapter's advantages against
    the harness's: its passes run by the harness's own PolicyContext on the same rows, its
    advantages by methods.compute on a batch the test builds from TRL's outputs."""
    from harness.replay import PolicyContext
    from methods.stats import within_group_signal

    _load(PLUGIN)
    trainer = _trainer(tmp_path)
    batch_rows = [trainer.train_dataset[i] for i in range(4) for _ in range(4)]
    base = type(trainer).__mro__[1]
    out = base._generate_and_score_completions(trainer, batch_rows)
    scored = trainer._scored
    rewards = scored[0].float()
    mask = out["completion_mask"]
    lengths = mask.sum(dim=1).tolist()
    assert rewards.shape == (16, 2) and (rewards[:, 1] > 0).any()
    ids = out["completion_ids"]
    names = ("parity", "vowels")
    examples = [trainer.examples[r["example_id"]] for r in scored[1]]
    model = trainer.accelerator.unwrap_model(trainer.model)
    plugin = "half-format"
    # the built-in methods (plugins other tests of this process loaded are not this test's)
    builtin = sorted(n for kind, n in plugins._BUILTIN if kind == "method")  # set by _load
    # mid-run, so a schedule (CoRT's warm-up) that missed TRL's step would differ
    trainer.state.global_step, trainer.state.max_steps = 3, 10
    checked = []
    for name in builtin + ["mrtpo+saw", plugin]:
        method = methods.get(name)
        if method.loss_terms or not method.pg_term:
            continue  # refused by the adapter (test below)
        opts = methods.options()
        trainer.method, trainer.method_name, trainer.method_options = method, name, opts
        trainer._pass_state = {}
        trainer._initial = model if "initial" in method.models(opts) else None
        # the adapter on the stored batch: TRL's own step returns the dict it made
        original = base._generate_and_score_completions
        base._generate_and_score_completions = lambda self, inputs: dict(out)
        try:
            trainer._scored = scored
            adv = type(trainer)._generate_and_score_completions(trainer, batch_rows)["advantages"]
        finally:
            base._generate_and_score_completions = original
        # the harness's own
        ctx = PolicyContext.of(model, trainer.processing_class, examples, ids, mask.long(),
                               names, temperature=trainer.temperature, batch_size=8,
                               rewards=rewards, initial=model, current=model,
                               texts=[c[-1]["content"] if isinstance(c, list) else c
                                      for c in scored[2]])
        ctx.group = torch.arange(16) // 4
        ctx.signal = within_group_signal(rewards, ctx.group)
        with torch.no_grad():
            passes = {p.name: p.run(ctx, opts) for p in method.passes}
        width = mask.shape[1]
        m = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
        want = methods.compute(name, methods.RolloutBatch(
            rewards=rewards, reward_names=names, reward_bounds=((0, 1), (0, 1)),
            group=ctx.group, response_mask=m, passes=passes, step=3, total_steps=10),
            opts).scores
        assert adv.shape == want.shape, name
        assert torch.allclose(adv, want, atol=1e-5), name
        checked.append(name)
    assert {"gdpo", "grpo", "mrtpo", "p2t", "tcrm", "verpo", "cort", "saw", "mrtpo+saw",
            plugin} <= set(checked)


@pytest.mark.model
def test_methods_with_loss_terms_are_refused(tmp_path):
    with pytest.raises(ValueError, match="loss terms"):
        _trainer(tmp_path, method="opsd")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gdpo", "saw", "mrtpo"])
def test_grpo_trainer_trains_two_steps_through_the_adapter(tmp_path, method):
    trainer = _trainer(tmp_path, method=method, steps=2)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    moved = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert moved, "two steps through the adapter changed no weight"


@pytest.mark.slow
def test_the_documented_example_trains():
    """docs/examples/trl_mrtpo.py, on tiny-random (its second argument): two steps whose
    advantages are not all zero and which change the weights."""
    import os
    import subprocess
    import sys

    pytest.importorskip("trl", reason="the trl extra: pip install -e '.[trl]'")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "trl_mrtpo.py"),
                          "mrtpo", "tiny-random"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    steps = [line for line in lines if line.startswith("{'loss'") and "'step': " in line]
    assert len(steps) == 2, run.stdout[-2000:]
    advantages = [float(x) for line in lines if line.startswith("advantages: [")
                  for x in line.split("[", 1)[1].rstrip("]").split(",")]
    assert advantages and any(abs(a) > 1e-3 for a in advantages), run.stdout[-2000:]
    moved = [float(line.rsplit(" ", 1)[1]) for line in lines
             if line.startswith("largest weight change:")]
    assert moved and moved[0] > 0, run.stdout[-2000:]
    # the page shows the example's code: its calls, as written
    page = (ROOT / "docs" / "integrations.md").read_text()
    example = (ROOT / "docs" / "examples" / "trl_mrtpo.py").read_text()
    for line in ("reward_funcs=reward_functions(task, by_id),  # one per reward, named as it",
                 "examples=by_id,  # what MRTPO replays: each prompt's verifier information",
                 'examples = TRAIN_SETS.get("if-synth").load(None, 0)[:4]'):
        assert line in page and line in example, line


def test_datasets_hash_beside_the_ifbench_spacy_stand_in():
    """IFBench's checkers put a spaCy stand-in in sys.modules; datasets' pickler (TRL hashes
    its datasets with it) checks spacy.Language whenever spacy is imported."""
    import sys

    pytest.importorskip("datasets")
    from datasets.fingerprint import Hasher

    from tasks.instruct.checkers import _import_ifbench
    from tasks.tools import synth

    _import_ifbench()
    assert "spacy" in sys.modules
    assert Hasher.hash(adapter.dataset(synth.generate(2, 0)))
