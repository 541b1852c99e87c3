"""The TRL adapter under the options a TRL user sets (harness/integrations/trl.py), each on a
real GRPOTrainer built on the toy task: tool results inside a completion, padded widths, LoRA,
reward functions named otherwise, TRL's own scaling options, TRL's conventions by default,
evaluation batches, and TRL's completions log. Where TRL's generation cannot produce the case
on a tiny random model (a tool result), TRL's own step output is edited as TRL would make it and
the adapter runs on it."""
import math
import pickle

import pytest
import torch

import methods
from harness.integrations import trl as adapter
from tests.test_trl_integration import LAUNCH_ENV, TOY, _load

pytestmark = pytest.mark.model
PASSES = ["mrtpo", "p2t", "tcrm", "cort", "verpo"]


@pytest.fixture(autouse=True)
def _plain_process(monkeypatch):
    for key in LAUNCH_ENV:
        monkeypatch.delenv(key, raising=False)


def _build(tmp_path, method="gdpo", method_options=None, peft=None, rename=None,
           tokenizer=None, **config):
    pytest.importorskip("trl", reason="the trl extra: pip install -e '.[trl]'")
    from trl import GRPOConfig

    from harness.models import load_model, load_tokenizer
    from tasks import TASKS, TRAIN_SETS

    _load(TOY)
    task = TASKS.get("toy")
    examples = TRAIN_SETS.get("toy-train").load(None, 0)[:4]
    by_id = {e.id: e for e in examples}
    funcs = adapter.reward_functions(task, by_id)
    for fn in funcs:
        fn.__name__ = (rename or {}).get(fn.__name__, fn.__name__)
    settings = dict(output_dir=str(tmp_path), per_device_train_batch_size=8,
                    gradient_accumulation_steps=1, num_generations=4, max_completion_length=8,
                    max_steps=1, learning_rate=1e-3, use_cpu=True, bf16=False, report_to=[],
                    save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0, beta=0.0)
    settings.update(config)
    extra = {"method_options": method_options} if method_options is not None else {}
    if peft is not None:
        extra["peft_config"] = peft
    return adapter.MethodGRPOTrainer(
        model=load_model("tiny-random", seed=3), args=GRPOConfig(**settings),
        train_dataset=adapter.dataset(examples),
        processing_class=tokenizer or load_tokenizer("tiny-random"),
        reward_funcs=funcs, method=method, examples=by_id,
        reward_bounds=[(rw.lo, rw.hi) for rw in task.rewards], **extra)


def _rows(trainer):
    return [trainer.train_dataset[i] for i in range(4) for _ in range(4)]


def _trl_step(trainer):
    """TRL's own step on one batch (its advantages, before the adapter's), and what it scored."""
    base = type(trainer).__mro__[1]
    out = base._generate_and_score_completions(trainer, _rows(trainer))
    return base, out, trainer._scored


def _adapter_on(trainer, base, out, scored):
    """The adapter's step on TRL's step output ``out`` (as TRL made it, or edited)."""
    original = base._generate_and_score_completions
    base._generate_and_score_completions = lambda self, inputs: dict(out)
    try:
        trainer._scored = scored
        return type(trainer)._generate_and_score_completions(trainer, _rows(trainer))
    finally:
        base._generate_and_score_completions = original


def _with_signal(trainer, tries=4):
    """TRL's step until some reward varies within a group (the random model's draws)."""
    for _ in range(tries):
        base, out, scored = _trl_step(trainer)
        r = scored[0].float().view(4, 4, -1)
        if bool((torch.nan_to_num(r).std(dim=1) > 0).any()):
            return base, out, scored
    pytest.fail("no reward varied within a group in four batches of the toy task")


@pytest.mark.parametrize("method", ["gdpo", "mrtpo"])
def test_model_tokens_after_a_tool_result_keep_their_credit(tmp_path, method):
    trainer = _build(tmp_path, method=method)
    base, out, scored = _with_signal(trainer)
    lengths = out["completion_mask"].sum(dim=1)
    row = int(torch.argmax(lengths))
    width = int(lengths[row])
    assert width >= 6, "the toy completions are 8 tokens at most; the longest is used"
    tool = torch.ones_like(out["completion_mask"])
    tool[row, 2:4] = 0  # tokens 2-3 are a tool's result: TRL trains on neither
    edited = dict(out, tool_mask=tool)
    seen = {}
    if method == "mrtpo":  # what the replay reads: the completion as the model saw it
        from harness import replay

        original = replay.PolicyContext.of.__func__

        def spy(cls, *args, **kwargs):
            seen["mask"] = args[4].clone()
            return original(cls, *args, **kwargs)
        replay.PolicyContext.of = classmethod(spy)
    try:
        adv = _adapter_on(trainer, base, edited, scored)["advantages"]
    finally:
        if method == "mrtpo":
            replay.PolicyContext.of = classmethod(original)
    assert adv[row, 2:4].abs().sum() == 0
    if method == "gdpo":  # one advantage per response, on every token trained
        assert torch.allclose(adv[row, :width][tool[row, :width].bool()], adv[row, 0])
    if method == "mrtpo":
        assert torch.equal(seen["mask"], out["completion_mask"].long())
    # a response with credit has it after the tool's result too
    if adv[row, 0] != 0:
        assert (adv[row, 4:width] != 0).all()


@pytest.mark.parametrize("method", PASSES)
def test_padded_widths_align_for_every_method_with_passes(tmp_path, method):
    trainer = _build(tmp_path, method=method, pad_to_multiple_of=16)
    base, out, scored = _trl_step(trainer)
    assert out["completion_ids"].shape[1] == 16  # TRL padded past the longest completion
    adv = _adapter_on(trainer, base, out, scored)["advantages"]
    assert adv.shape == out["completion_mask"].shape
    assert torch.isfinite(adv).all()
    assert (adv * (1 - out["completion_mask"])).abs().sum() == 0


def test_truncated_completions_masked_by_trl_align(tmp_path):
    trainer = _build(tmp_path, method="mrtpo", mask_truncated_completions=True,
                     max_completion_length=4)
    base, out, scored = _trl_step(trainer)
    adv = _adapter_on(trainer, base, out, scored)["advantages"]
    assert adv.shape == out["completion_mask"].shape
    assert (adv[out["completion_mask"].sum(dim=1) == 0] == 0).all()


def test_replay_methods_train_a_lora_policy(tmp_path):
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                             task_type="CAUSAL_LM")
    trainer = _build(tmp_path, method="mrtpo", peft=config)
    assert type(trainer.model).__name__.startswith("Peft")
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters()
            if "lora_B" in n}
    trainer.train()
    assert any(not torch.equal(p, lora[n]) for n, p in trainer.model.named_parameters()
               if n in lora), "one MRTPO step on a LoRA policy changed no adapter weight"


def test_reward_functions_named_otherwise_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"reward functions \['a', 'b'\] are named as no "
                                         r"reward.*\(parity, vowels\)"):
        _build(tmp_path, method="mrtpo", rename={"parity": "a", "vowels": "b"})
    # one renamed: refused on the first batch it scores
    trainer = _build(tmp_path, method="mrtpo", rename={"vowels": "vowel_count"})
    base, out, scored = _trl_step(trainer)
    with pytest.raises(ValueError, match=r"\['vowel_count'\]"):
        _adapter_on(trainer, base, out, scored)
    # a method that replays nothing reads no verifier information: names are free
    _build(tmp_path, method="gdpo", rename={"parity": "a", "vowels": "b"})


@pytest.mark.parametrize("setting, word", [
    ({"scale_rewards": "batch"}, "scale_rewards='batch'"),
    ({"scale_rewards": "none"}, "scale_rewards='none'"),
    ({"multi_objective_aggregation": "normalize_then_sum"}, "multi_objective_aggregation"),
    ({"reward_weights": [2.0, 1.0]}, r"reward_weights=\[2.0, 1.0\]")])
def test_trl_s_own_advantage_options_are_refused_not_ignored(tmp_path, setting, word):
    with pytest.raises(ValueError, match=word):
        _build(tmp_path, method="gdpo", **setting)


def test_unit_reward_weights_and_trl_defaults_pass(tmp_path):
    trainer = _build(tmp_path, method="mrtpo", reward_weights=[1.0, 1.0])
    opts = trainer.method_options
    assert (opts.conventions, opts.whiten) == ("trl", "token")
    assert _build(tmp_path, method="gdpo").method_options.whiten is None


def test_default_conventions_give_trl_s_own_gdpo(tmp_path):
    """Without method_options the adapter's gdpo is TRL's own normalize_then_sum."""
    trainer = _build(tmp_path, method="gdpo")
    base, out, scored = _with_signal(trainer)
    trainer.multi_objective_aggregation = "normalize_then_sum"  # TRL's GDPO, on this batch
    try:
        original = trainer._calculate_rewards
        trainer._calculate_rewards = lambda *a: scored[0]
        own = base._generate_and_score_completions(trainer, _rows(trainer))["advantages"]
    finally:
        trainer._calculate_rewards = original
        trainer.multi_objective_aggregation = "sum_then_normalize"
    ours = _adapter_on(trainer, base, out, scored)["advantages"]
    assert own.dim() == 1
    assert torch.allclose(ours[:, 0], own, atol=1e-5), (ours[:, 0], own)


def test_evaluation_batches_train_no_pass_and_keep_trl_s_advantages(tmp_path):
    trainer = _build(tmp_path, method="tcrm")
    trainer.model.eval()
    base, out, scored = _trl_step(trainer)
    got = _adapter_on(trainer, base, out, scored)
    assert torch.equal(got["advantages"], out["advantages"])
    assert not getattr(trainer, "_pass_state", {}), "TCRM's value model was built on eval rows"


def test_trl_s_completion_log_shows_the_method_s_advantages(tmp_path):
    trainer = _build(tmp_path, method="mrtpo")
    base, out, scored = _with_signal(trainer)
    adv = _adapter_on(trainer, base, out, scored)["advantages"]
    mask = out["completion_mask"]
    want = ((adv * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).tolist()
    logged = list(trainer._logs["advantages"])  # TRL keeps the last generation batch's
    assert logged and len(logged) <= len(want)
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(logged, want[-len(logged):]))
    assert any(abs(a) > 1e-3 for a in logged)
    # TRL's share of completions without signal is the method's: no advantage on any token
    none = float(((adv * mask).abs().sum(dim=1) == 0).float().mean())
    assert trainer._metrics["train"]["frac_reward_zero_std"][-1] == pytest.approx(none)


def test_batch_of_keeps_holes_in_the_mask():
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    mask = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]])
    b = adapter.batch_of(r, mask, 2, ["a", "b"], [(0, 1), (0, 1)])
    assert b.response_mask.tolist() == mask.tolist()
    out = methods.compute("gdpo", b).scores
    assert (out[0, 1] == 0) and (out[0, 2] == out[0, 0])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["mrtpo", "verpo"])
def test_methods_with_passes_run_under_two_trl_processes(tmp_path, method):
    """Two CPU processes (torchrun, gloo), each running the passes on its own whole groups:
    the advantages each trained with are the method's on the batch of both processes' rows,
    scores, trained tokens and pass outputs, in TRL's order (so a row, a width or a process
    out of place fails here)."""
    import os
    import subprocess
    import sys
    from dataclasses import replace

    from tests.test_trl_integration import ROOT

    pytest.importorskip("trl", reason="the trl extra: pip install -e '.[trl]'")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                          "2", str(ROOT / "tests" / "scripts" / "trl_two_processes.py"),
                          method, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert all(r["processes"] == 2 for r in ranks)
    width = max(r["trained"].shape[1] for r in ranks)

    def padded(x):
        return torch.nn.functional.pad(x, (0, width - x.shape[-1]))

    mask = torch.cat([padded(r["trained"]) for r in ranks])
    passes = {k: torch.cat([padded(r["passes"][k]) for r in ranks]) for k in ranks[0]["passes"]}
    rewards = torch.cat([r["rewards"] for r in ranks])
    assert rewards.shape == (16, 2)
    batch = adapter.batch_of(rewards, mask, 4, ["parity", "vowels"], [(0, 1), (0, 1)], passes,
                             step=0, total_steps=1)
    opts = replace(methods.options(), conventions="trl", whiten="token")
    want = methods.compute(method, batch, opts).scores * mask
    for r, got in enumerate(ranks):
        mine = want[8 * r:8 * (r + 1), :got["advantages"].shape[1]]
        assert torch.allclose(got["advantages"], mine, atol=1e-5), (r, got["advantages"], mine)
    assert bool((want != 0).any()), "no advantage in either process: nothing was compared"


def test_the_replay_renders_prompts_as_trl_does(tmp_path):
    """TRL renders each prompt with its chat_template_kwargs (and tools); the passes' contexts
    are rendered the same way: the tokens the model read before its completion."""
    from harness import replay
    from harness.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    tok.chat_template = ("{{ flavour }}|{% if tools %}{{ tools | length }} tools|{% endif %}"
                         "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                         "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
    trainer = _build(tmp_path, method="mrtpo", tokenizer=tok,
                     chat_template_kwargs={"flavour": "ZQX"})
    seen = {}
    original = replay.PolicyContext.of.__func__

    def spy(cls, *args, **kwargs):
        seen["tokenizer"], seen["examples"] = args[1], args[2]
        return original(cls, *args, **kwargs)
    replay.PolicyContext.of = classmethod(spy)
    try:
        base, out, scored = _trl_step(trainer)
        _adapter_on(trainer, base, out, scored)
    finally:
        replay.PolicyContext.of = classmethod(original)
    rendered = replay._render(seen["tokenizer"], [list(seen["examples"][0].messages)])[0]
    prompt = out["prompt_ids"][0][out["prompt_mask"][0].bool()].tolist()
    assert prompt == rendered
    assert tok.decode(rendered).startswith("ZQX|")
    # TRL's tools reach the template as TRL passes them; a call's own arguments win
    with_tools = adapter.RenderedAsTRL(tok, tools=[{"name": "lookup"}], flavour="Q")
    text = with_tools.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text.startswith("Q|1 tools|user: hi")
    assert with_tools.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                          flavour="R").startswith("R|")


def test_tcrm_s_value_model_is_saved_and_restored_with_trl_s_checkpoints(tmp_path):
    trainer = _build(tmp_path / "a", method="tcrm", save_strategy="steps", save_steps=1)
    trainer.train()
    folder = tmp_path / "a" / "checkpoint-1"
    saved = torch.load(folder / adapter.STATE_FILE.format(0), weights_only=False)
    assert saved, "the checkpoint holds no pass state"
    resumed = _build(tmp_path / "b", method="tcrm")
    loaded = {}
    load = resumed._load_optimizer_and_scheduler

    def spy(checkpoint):  # the pass state as TRL's resume left it, before any further step
        load(checkpoint)
        loaded.update(pickle.loads(pickle.dumps(resumed.__dict__.get("_pass_state", {}))))
    resumed._load_optimizer_and_scheduler = spy
    resumed.train(resume_from_checkpoint=str(folder))
    state = loaded
    assert state and set(state) == set(saved)
    for key in saved:  # the value model's trained parameters and its optimizer's state
        want, got = saved[key]._restored, state[key]._restored
        assert want["params"] and set(want["params"]) == set(got["params"])
        assert all(torch.equal(want["params"][k], got["params"][k]) for k in want["params"])
        assert want["optimizer"]["state"], "the optimizer stepped: it has state to restore"
        assert str(want["optimizer"]) == str(got["optimizer"])
        assert state[key].updates == saved[key].updates > 0


def test_zero3_is_refused_for_methods_that_read_the_initial_policy():
    from harness.integrations.trl_checks import initial_copy_refused

    opts = methods.options()
    assert "ZeRO-3" in initial_copy_refused("tcrm", methods.get("tcrm"), opts, zero_stage=3)
    assert initial_copy_refused("tcrm", methods.get("tcrm"), opts, zero_stage=2) == ""
    assert initial_copy_refused("mrtpo", methods.get("mrtpo"), opts, zero_stage=3) == ""
