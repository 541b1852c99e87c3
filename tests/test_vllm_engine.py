"""The vLLM engine's CPU-testable parts: version check, paper presets, early refusals, and the
weight-sync bookkeeping and log-prob check against a stand-in with vLLM's interface (a real
HF model behind it, so the log-probs it returns are a model's)."""
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from harness import checks
from harness import config as cfg
from harness.rollouts import vllm


def test_supported_versions_and_the_message_for_others():
    assert vllm.version_problem("0.33.0") == ""
    assert vllm.version_problem("0.33.2") == ""
    for bad in ("0.32.9", "0.34.0", "1.0.0", "not-a-version"):
        text = vllm.version_problem(bad)
        assert f"found {bad}" in text and "requirements/constraints-gpu.txt" in text
    assert "not installed" in vllm.version_problem(None)


def test_the_supported_range_is_the_one_the_gpu_extra_pins():
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["gpu"]
    pinned = [Requirement(r) for r in extra if Requirement(r).name == "vllm"]
    assert len(pinned) == 1
    version = str(pinned[0].specifier).lstrip("=")
    assert vllm.version_problem(version) == ""


PAPER_MODELS = {
    # preset: (family, model, Table 9 steps, prompts, G, temperature, top-p, top-k)
    "paper-sql-3b": ("paper-sql", "Qwen2.5-Coder-3B-Instruct", 100, 32, 8, 1.1, 1.0, 0),
    "paper-sql-7b": ("paper-sql", "Qwen2.5-Coder-7B-Instruct", 100, 32, 8, 1.1, 1.0, 0),
    "paper-if-qwen2.5-7b": ("paper-if", "Qwen2.5-7B-Instruct", 300, 64, 8, 1.0, 0.99, 100),
    "paper-if-qwen3-4b": ("paper-if", "Qwen3-4B-Instruct-2507", 300, 64, 8, 1.0, 0.99, 100),
    "paper-tool-1.5b": ("paper-tool", "Qwen2.5-1.5B-Instruct", 100, 512, 4, 1.0, 1.0, 0),
    "paper-tool-3b": ("paper-tool", "Qwen2.5-3B-Instruct", 100, 512, 4, 1.0, 1.0, 0),
}


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
def test_each_paper_model_preset_matches_table9(name):
    family, model, steps, prompts, g, temp, top_p, top_k = PAPER_MODELS[name]
    c = cfg.resolve(name, {})
    assert (c.model.model, c.training.steps, c.rollout.prompts_per_step, c.rollout.group_size,
            c.rollout.temperature, c.rollout.top_p, c.rollout.top_k) == (
        model, steps, prompts, g, temp, top_p, top_k)
    assert (c.training.lr, c.rollout.max_response_tokens, c.model.dtype) == (1e-6, 1024,
                                                                             "bfloat16")
    assert (c.rollout.engine, c.training.workers, c.training.use_gpu,
            c.training.zero_stage) == ("vllm", 8, True, 3)
    # every worker's responses split into whole micro-batches: accumulation is an integer
    local = checks.local_responses(c, c.training.workers)
    assert local % c.training.micro_batch_size == 0
    from harness.engine import ds_config

    ds = ds_config(c, local)
    assert ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] == local
    # on this machine: no model folder, no GPU, no vLLM - each named, nothing else
    found = checks.settings_problems(c)
    assert any("--model-dir" in p for p in found)
    assert all(("model" in p) or ("CUDA" in p) or ("vLLM" in p) for p in found), found


def test_a_model_name_is_read_from_the_model_dir(tmp_path):
    from harness.launch import absolute

    (tmp_path / "Qwen2.5-3B-Instruct").mkdir()
    (tmp_path / "Qwen2.5-3B-Instruct" / "config.json").write_text("{}")
    c = absolute(cfg.resolve("paper-tool-3b", {"model_dir": str(tmp_path)}))
    assert c.model.model == str(tmp_path / "Qwen2.5-3B-Instruct")
    assert checks.model_problems(c) == []
    missing = cfg.resolve("paper-tool-1.5b", {"model_dir": str(tmp_path)})
    assert "Qwen2.5-1.5B-Instruct does not exist" in checks.model_problems(absolute(missing))[0]


def test_engine_vllm_without_cuda_fails_before_ray_with_a_clear_message(monkeypatch, capsys):
    import ray

    from harness import cli

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    rc = cli.main(["run", "--engine", "vllm", "--method", "gdpo", "--task", "bfcl",
                   "--preset", "smoke", "--results-dir", "/nonexistent/never-written"])
    assert rc == 2 and started == []
    text = capsys.readouterr().err
    assert "--engine vllm needs a CUDA GPU and this machine has none" in text
    assert "--engine hf" in text


def test_a_cluster_driver_leaves_device_checks_to_the_workers():
    c = cfg.resolve("smoke", {"engine": "vllm", "use_gpu": True, "ray_address": "auto"})
    driver = checks.settings_problems(c)
    assert not any("CUDA" in p or "vLLM" in p for p in driver), driver
    if not torch.cuda.is_available():
        worker = checks.settings_problems(c, on_worker=True)
        assert any("needs a CUDA GPU" in p for p in worker)


@pytest.mark.parametrize("overrides, expected", [
    ({"engine": "sglang"}, "unknown engine 'sglang'"),
    ({"placement_strategy": "RANDOM"}, "unknown placement_strategy 'RANDOM'"),
    ({"engine": "vllm", "vllm_gpu_memory": 1.5}, "vllm_gpu_memory is 1.5"),
    ({"engine": "vllm", "model": "tiny-random"}, "tiny-random is built in memory"),
    ({"cpus_per_worker": -1}, "cpus_per_worker is -1"),
    ({"engine": "vllm", "use_gpu": True, "gpus_per_worker": 0.5}, "needs whole GPUs per worker"),
])
def test_engine_and_placement_settings_are_checked(overrides, expected):
    found = checks.settings_problems(cfg.resolve("smoke", overrides))
    assert any(expected in p for p in found), found


def test_whole_gpus_per_worker_pass_the_vllm_check():
    for gpus in (1.0, 2.0):
        c = cfg.resolve("smoke", {"engine": "vllm", "use_gpu": True, "gpus_per_worker": gpus})
        assert not any("whole GPUs" in p for p in checks.settings_problems(c))


def test_worker_resources_follow_the_config():
    from harness.backend import worker_resources

    c = cfg.resolve("smoke", {"cpus_per_worker": 3, "workers": 2})
    assert worker_resources(c) == {"CPU": 3}
    c = cfg.resolve("paper-tool-3b", {"cpus_per_worker": 12, "gpus_per_worker": 1.0})
    assert worker_resources(c) == {"CPU": 12, "GPU": 1.0}


# --- sampling and Rollout shapes ----------------------------------------------------------

def test_sampling_arguments_match_the_hf_engine():
    kw = vllm.sampling_kwargs(4, 96, 1.1, 0.99, 0, False, 7, [2, 0])
    assert kw == dict(n=4, max_tokens=96, seed=7, stop_token_ids=[2, 0], detokenize=False,
                      temperature=1.1, top_p=0.99, top_k=0)  # 0 = off, in vLLM too
    assert vllm.sampling_kwargs(1, 8, 1.0, 1.0, 100, False, None, [2])["top_k"] == 100
    greedy = vllm.sampling_kwargs(1, 8, 1.1, 0.5, 5, True, None, [2])
    assert (greedy["temperature"], greedy["top_p"], greedy["top_k"]) == (0.0, 1.0, 0)


def test_completions_become_the_hf_engines_rollout():
    eos, pad = 2, 0
    prompts = [[5, 6, 7], [8]]
    comps = [[[11, 12, eos], [13]], [[14, eos, 15]]]  # ended by EOS, by length, EOS then more
    ro = vllm.to_rollout(prompts, comps, pad, [eos], lambda rows: [str(r) for r in rows])
    assert ro.example_index == [0, 0, 1]
    assert ro.prompt_ids.tolist() == [[5, 6, 7], [5, 6, 7], [pad, pad, 8]]
    assert ro.prompt_mask.tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 1]]
    assert ro.response_ids.tolist() == [[11, 12, eos], [13, pad, pad], [14, eos, 15]]
    assert ro.response_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert ro.texts == ["[11, 12, 2]", "[13]", "[14, 2]"]


# --- weight sync against a stand-in engine ------------------------------------------------

class StandInLLM:
    """vLLM's ``LLM`` surface as the engine uses it, over a plain HF model on CPU: generate
    with prompt log-probs (prompts positional-only), sleep / wake_up with vLLM's sleeping
    state (``llm_engine.is_sleeping``), apply_model with a model whose ``load_weights`` returns
    the names it wrote (vLLM's contract), collective_rpc("reload_weights") (the checkpoint's
    weights back), reset_prefix_cache.

    ``lose_weights_on_wake``: waking scrambles the weights (a lost buffer); ``paused``: the
    scheduler stays asleep until woken by name; ``stuck``: the engine never stops sleeping;
    ``busy``: reset_prefix_cache refuses."""

    def __init__(self, model, lose_weights_on_wake=False, paused=False, stuck=False,
                 busy=False):
        self.model = model
        self.calls: list[str] = []
        self.lose_weights_on_wake = lose_weights_on_wake
        self.paused, self.stuck, self.busy = paused, stuck, busy
        self.asleep: set[str] = set()
        self.checkpoint = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.llm_engine = SimpleNamespace(is_sleeping=lambda: self.stuck or bool(self.asleep))

        def load_weights(weights):
            params = dict(model.named_parameters())
            done = set()
            for name, tensor in weights:
                params[name].data.copy_(tensor.to(params[name].dtype))
                done.add(name)
            return done
        model.load_weights = load_weights

    def apply_model(self, func, /):
        return [func(self.model)]

    def collective_rpc(self, method, /):
        self.calls.append(f"collective_rpc({method})")
        assert method == "reload_weights"
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p.copy_(self.checkpoint[n])

    def sleep(self, level=1):
        self.calls.append(f"sleep({level})")
        self.asleep = {"weights", "kv_cache", "scheduling"}
        if level == 2:  # the weights are discarded
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan"))

    def wake_up(self, tags=None):
        self.calls.append(f"wake_up({','.join(tags) if tags else 'all'})")
        self.asleep -= set(tags or ("weights", "kv_cache", "scheduling"))
        if not self.paused and not self.asleep & {"weights", "kv_cache"}:
            self.asleep.discard("scheduling")  # resumed once everything else is awake
        if self.lose_weights_on_wake:  # what a lost weight buffer looks like
            with torch.no_grad():
                for p in self.model.parameters():
                    p.normal_()

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")
        return not self.busy

    @torch.no_grad()
    def generate(self, prompts, /, sampling_params, use_tqdm=False):
        ids = torch.tensor([prompts[0]["prompt_token_ids"]])
        logp = torch.log_softmax(self.model(input_ids=ids).logits[0].float(), -1)
        rows = [None] + [{int(t): SimpleNamespace(logprob=float(logp[i, t]))}
                         for i, t in enumerate(ids[0, 1:])]
        return [SimpleNamespace(prompt_logprobs=rows, outputs=[])]


@pytest.fixture(scope="module")
def policy():
    from harness.models import load_model

    return load_model("tiny-random", seed=0)


def stand_in(policy, expected_names=None, sleep_level=1, **kw):
    import copy

    from harness.models import load_tokenizer

    engine_model = copy.deepcopy(policy)
    with torch.no_grad():
        for p in engine_model.parameters():
            p.zero_()  # nothing loaded yet
    llm = StandInLLM(engine_model, **kw)
    return vllm.VLLMRollout(llm, load_tokenizer("tiny-random"), [2], 4096, torch.float32,
                            "cpu", sleep_level=sleep_level, expected_names=expected_names,
                            empty_cache=lambda: llm.calls.append("empty_cache")), llm


def sync(rollout, policy):
    rollout.begin_sync()
    for group in vllm.buckets(policy.named_parameters(), rollout.sync_bucket_bytes):
        rollout.load_weights([(n, p.data) for n, p in group])
    rollout.end_sync()


def probe_logprobs(model, ids):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def test_buckets_bound_each_gather_and_keep_every_parameter(policy):
    named = list(policy.named_parameters())
    sizes = {n: p.numel() * p.element_size() for n, p in named}
    cap = 4096
    groups = list(vllm.buckets(named, cap))
    assert [n for g in groups for n, _ in g] == [n for n, _ in named]  # all, in order, once
    for g in groups:
        assert len(g) == 1 or sum(sizes[n] for n, _ in g) <= cap
    # a ZeRO-3 partition's full size is its ds_shape
    fake = torch.nn.Parameter(torch.zeros(1))
    fake.ds_shape = torch.Size([1024, 1024])
    assert len(list(vllm.buckets([("a", fake), ("b", fake)], 5 << 20))) == 2


def test_a_sync_sends_every_name_shape_and_dtype_and_passes_the_logprob_check(policy):
    rollout, llm = stand_in(policy)
    rollout.sleep()
    sync(rollout, policy)
    sent = rollout.last_sync.sent
    assert [(n, s) for n, s, _ in sent] == [(n, tuple(p.shape))
                                            for n, p in policy.named_parameters()]
    assert {d for _, _, d in sent} == {torch.float32}
    assert rollout.last_sync.buckets > 1  # tiny-random's weights span several 4 kB buckets
    assert rollout.last_sync.bytes == sum(p.numel() * 4 for p in policy.parameters())
    # the weights wake first, the KV cache once they are loaded, each after PyTorch's cache
    # is emptied; then stale prefixes go
    assert llm.calls == ["sleep(1)", "empty_cache", "wake_up(weights)", "empty_cache",
                         "wake_up(kv_cache)", "reset_prefix_cache"]
    assert not llm.llm_engine.is_sleeping()
    ids = list(range(3, 40))
    gap = vllm.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 1e-5,
                         "after sync 1")
    assert gap < 1e-6


def test_the_engine_dtype_is_what_is_sent():
    named = [("w", torch.ones(2, 3, dtype=torch.float32))]
    out = vllm.engine_tensors(named, torch.bfloat16)
    assert out[0][1].dtype == torch.bfloat16 and out[0][1].shape == (2, 3)


def test_weights_lost_across_sleep_and_wake_fail_the_check_loudly(policy):
    rollout, llm = stand_in(policy, lose_weights_on_wake=True)
    sync(rollout, policy)  # loaded while awake
    rollout.sleep()
    rollout.wake_up()  # the stand-in scrambles its weights here, as a lost buffer would
    ids = list(range(3, 40))
    with pytest.raises(RuntimeError, match="vLLM weights are not the policy's after wake"):
        vllm.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 0.05,
                       "after wake")


def test_a_partial_load_is_refused(policy):
    rollout, llm = stand_in(policy)
    rollout.begin_sync()
    named = list(policy.named_parameters())
    rollout.load_weights([(n, p.data) for n, p in named[:-1]])  # the last one never sent
    with pytest.raises(RuntimeError, match="left 1 vLLM parameters unwritten"):
        rollout.end_sync()


def test_the_gap_is_mean_and_max_absolute_difference():
    a = torch.tensor([-1.0, -2.0, -3.0])
    b = torch.tensor([-1.0, -2.5, -2.0])
    assert vllm.logprob_gap(a, b) == pytest.approx((0.5, 1.0))
    assert vllm.check_gap(a, b, 0.5, "x") == pytest.approx(0.5)
    with pytest.raises(RuntimeError, match=r"0\.5000 \(max 1\.0000\) over 3 probe tokens"):
        vllm.check_gap(a, b, 0.49, "x")
    with pytest.raises(RuntimeError):
        vllm.check_gap(a, torch.tensor([float("nan")] * 3), 1.0, "x")
    with pytest.raises(ValueError, match="shapes differ"):
        vllm.logprob_gap(a, b[:2])


def test_generation_on_a_sleeping_engine_and_loads_outside_a_sync_are_refused(policy):
    rollout, _ = stand_in(policy)
    rollout.sleep()
    with pytest.raises(RuntimeError, match="sleeping"):
        rollout._generate_ids([[1, 2]], n=1)
    with pytest.raises(RuntimeError, match="outside begin_sync"):
        rollout.load_weights([])


def test_the_gpu_check_stops_at_once_without_a_gpu(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi: the script would run for real")
    script = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no NVIDIA GPU is visible here" in done.stderr


def test_each_prompt_gets_its_own_seed_and_the_same_seed_the_same_ones():
    seeds = vllm.prompt_seeds(123, 64)
    assert len(set(seeds)) == 64 and seeds == vllm.prompt_seeds(123, 64)
    assert seeds != vllm.prompt_seeds(124, 64)
    assert vllm.prompt_seeds(None, 3) == [None, None, None]


def test_generate_sends_one_request_per_prompt_and_returns_the_rollout():
    from harness.models import load_tokenizer

    class Recorder:
        def generate(self, prompts, /, sampling_params, use_tqdm=False):  # as vLLM may
            self.prompts, self.params = prompts, sampling_params
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7, 8, 2])
                                             for _ in range(p.n)]) for p in sampling_params]

    tok = load_tokenizer("tiny-random")
    llm = Recorder()
    rollout = vllm.VLLMRollout(llm, tok, [2], 1 << 20, torch.float32, "cpu",
                               max_model_len=64)
    ro = rollout.generate([], 3, 5, 1.0, 1.0, 0, seed=9, prompt_ids=[[4, 5], [6]])
    assert [p["prompt_token_ids"] for p in llm.prompts] == [[4, 5], [6]]
    assert [(p.n, p.max_tokens, p.top_k) for p in llm.params] == [(3, 5, 0), (3, 5, 0)]
    assert llm.params[0].seed != llm.params[1].seed
    assert ro.example_index == [0, 0, 0, 1, 1, 1]
    assert ro.response_mask.tolist() == [[1, 1, 1]] * 6
    with pytest.raises(ValueError, match="exceeds the vLLM engine's context of 64"):
        rollout.generate([], 1, 60, prompt_ids=[[1] * 10])


# --- first contact on a GPU: what a source review found (wake order, probe, scheduler, level 2,
# shards) ----------------------------------------------------------------------------------

def test_the_first_sync_gap_is_reported_and_later_ones_are_held_to_it(policy):
    rollout, _ = stand_in(policy)
    rollout.tolerance = 0.05
    p = torch.tensor([-1.0, -2.0, -3.0, -4.0])
    first = p + torch.tensor([0.1, -0.1, 0.1, -0.1])  # a kernel gap of 0.1, above 0.05
    with pytest.warns(RuntimeWarning, match=r"first weight sync's log-prob gap is 0\.1000"):
        assert rollout.check_probe(p, first) == pytest.approx(0.1)
    assert rollout.first_probe["policy"] == p.tolist()
    assert rollout.first_probe["engine"] == pytest.approx(first.tolist())
    assert rollout.check_probe(p, p + 0.14) == pytest.approx(0.14)  # within 0.1 + 0.05
    with pytest.raises(RuntimeError, match=r"exceeds the first sync's 0\.1000 \+ "
                                           r"--vllm-sync-tolerance 0\.05"):
        rollout.check_probe(p, p + 0.2)


def test_a_first_sync_no_kernel_difference_explains_stops_the_run(policy):
    rollout, _ = stand_in(policy)
    p = torch.tensor([-1.0, -2.0])
    with pytest.raises(RuntimeError, match="no kernel difference explains"):
        rollout.check_probe(p, p - 3.0)
    assert rollout.first_probe is None


def test_a_scheduler_left_paused_is_woken_and_a_stuck_engine_refused(policy):
    rollout, llm = stand_in(policy, paused=True)
    rollout.sleep()
    sync(rollout, policy)
    assert llm.calls[-3:] == ["wake_up(kv_cache)", "wake_up(scheduling)", "reset_prefix_cache"]
    assert not llm.llm_engine.is_sleeping()
    rollout, llm = stand_in(policy, stuck=True)
    rollout.sleep()
    with pytest.raises(RuntimeError, match="still reports sleeping"):
        sync(rollout, policy)


def test_a_refused_prefix_cache_reset_stops_the_sync(policy):
    rollout, _ = stand_in(policy, busy=True)
    with pytest.raises(RuntimeError, match="reset_prefix_cache returned False"):
        sync(rollout, policy)


def test_level_two_reloads_the_checkpoint_then_the_policys_weights(policy):
    rollout, llm = stand_in(policy, sleep_level=2)
    sync(rollout, policy)
    rollout.sleep()  # the stand-in discards its weights (NaN) at level 2
    with pytest.raises(RuntimeError, match="level-2 sleep before a weight sync"):
        rollout.wake_up()
        rollout._generate_ids([[1, 2]], n=1, max_tokens=1)
    rollout.sleep()
    sync(rollout, policy)
    assert llm.calls[-7:] == ["sleep(2)", "empty_cache", "wake_up(weights)",
                              "collective_rpc(reload_weights)", "empty_cache",
                              "wake_up(kv_cache)", "reset_prefix_cache"]
    ids = list(range(3, 40))
    gap = vllm.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 1e-5, "x")
    assert gap < 1e-6 and rollout.weights_current


def test_a_sync_missing_one_shard_is_refused_before_anything_loads(policy):
    names = {n for n, _ in policy.named_parameters()}
    shard = sorted(n for n in names if "k_proj" in n)[0]
    # the engine's own report cannot see it: a fused qkv counts as loaded after any shard
    rollout, llm = stand_in(policy, expected_names=names)
    rollout.begin_sync()
    rollout.load_weights([(n, p.data) for n, p in policy.named_parameters() if n != shard])
    with pytest.raises(RuntimeError, match=f"lacks 1 of the model's {len(names)} parameters"):
        rollout.end_sync()
    # through sync(): refused before any wake or load
    rollout, llm = stand_in(policy, expected_names=names | {"model.layers.9.mlp.up_proj.weight"})
    rollout.sleep()
    with pytest.raises(RuntimeError, match=r"before loading\) lacks 1"):
        rollout.sync(SimpleNamespace(module=policy))
    assert llm.calls == ["sleep(1)"]


def test_the_expected_names_are_the_hf_models_parameters(policy, tmp_path):
    policy.save_pretrained(tmp_path)
    assert vllm.model_parameter_names(str(tmp_path)) == {n for n, _ in policy.named_parameters()}


# --- the offline GPU check -----------------------------------------------------------------

def _gpu_check(*args, timeout=60):
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                          timeout=timeout)


def _wheelhouse(tmp_path):
    import hashlib

    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "a-1.0-py3-none-any.whl").write_bytes(b"not really a wheel")
    digest = hashlib.sha256(b"not really a wheel").hexdigest()
    (wh / "SHA256SUMS").write_text(f"{digest}  ./a-1.0-py3-none-any.whl\n")
    return wh


def test_the_offline_dry_run_checks_the_wheelhouse_and_prints_the_plan(tmp_path):
    wh = _wheelhouse(tmp_path)
    done = _gpu_check("--offline", str(wh), "--model", str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "1 wheels, 18 bytes, checksums match" in done.stdout
    assert f"pip install --no-index --no-deps {wh}/*.whl" in done.stdout
    assert "--zero-stage 0 --label gpu-offline-zero0 --evaluate --eval-limit 32" in done.stdout
    assert "--zero-stage 3 --label gpu-offline-zero3" in done.stdout
    assert f"--model {tmp_path}" in done.stdout and "harness.assets" not in done.stdout


def test_the_offline_dry_run_joins_the_model_parts_it_was_brought(tmp_path):
    import hashlib

    wh = _wheelhouse(tmp_path)
    parts = tmp_path / "wh-model"
    parts.mkdir()
    sums = []
    for i, data in enumerate((b"first half", b"second half")):
        (parts / f"m-0.1-py3-none-any.whl.part-0{i}").write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  ./m-0.1-py3-none-any.whl.part-0{i}")
    (parts / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    done = _gpu_check("--offline", str(wh), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"cat {parts}/*.part-* > {parts}/m-0.1-py3-none-any.whl" in done.stdout
    assert "harness.assets" in done.stdout
    (parts / "m-0.1-py3-none-any.whl.part-01").unlink()  # a part not brought along
    done = _gpu_check("--offline", str(wh), "--dry-run")
    assert done.returncode == 2 and "bring every part" in done.stderr


@pytest.mark.parametrize("case, message", [
    ("missing", "no wheels in"), ("damaged", "does not match its SHA256SUMS"),
    ("no model", "no model: bring the embedded one")])
def test_the_offline_check_refuses_what_it_cannot_run(tmp_path, case, message):
    wh = _wheelhouse(tmp_path)
    if case == "missing":
        wh = tmp_path / "nowhere"
    if case == "damaged":
        (wh / "a-1.0-py3-none-any.whl").write_bytes(b"changed")
    done = _gpu_check("--offline", str(wh), "--dry-run")
    assert done.returncode == 2 and message in done.stderr


def test_the_offline_check_stops_at_once_without_a_gpu(tmp_path):
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi: the script would run for real")
    done = _gpu_check("--offline", str(_wheelhouse(tmp_path)), "--model", str(tmp_path))
    assert done.returncode == 2 and "no NVIDIA GPU is visible here" in done.stderr


def test_the_offline_wheel_list_pins_the_cpu_installs_versions():
    from pathlib import Path

    from packaging.utils import canonicalize_name

    root = Path(__file__).resolve().parents[1] / "requirements"

    def pins(name):
        out = {}
        for line in (root / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and "==" in line:
                pkg, version = line.split("==")
                out[canonicalize_name(pkg.split("[")[0])] = version.strip()
        return out

    offline = pins("gpu-offline.txt")
    lines = [x for x in (root / "gpu-offline.txt").read_text().splitlines()
             if x.strip() and not x.startswith("#")]
    assert len(offline) == len(lines), "every offline wheel is pinned with =="
    cpu = {**pins("cpu.txt"), **pins("constraints-cpu.txt"), **pins("no-deps.txt")}
    differ = {k: (v, cpu[k]) for k, v in offline.items() if k in cpu and cpu[k] != v}
    assert not differ, differ
    assert {"deepspeed", "bfcl-eval", "pydantic"} <= set(offline)
