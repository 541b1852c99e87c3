"""A test plugin: the engine ``vllm-cuda-standin``, the project's own vLLM engine
(``harness.rollouts.vllm.VLLMRollout``, unchanged) over a strict stand-in for the CUDA build of
vLLM 0.33, on the CPU. It declares the CUDA build's capabilities (sleep) and keeps vLLM's state
rules where the CPU build does not (vLLM's CPU build refuses sleep mode, so nothing else on a
CPU exercises the GPU engine's life cycle):

- a generation on a sleeping engine is refused (vLLM's paused scheduler would wait forever);
- a level-2 sleep discards the weights (NaN), and a generation with discarded weights is
  refused until they are loaded again;
- ``reload_weights`` outside ``set_current_vllm_config`` is refused, and so is any reload into
  weights that are asleep (unmapped memory);
- ``llm_engine.is_sleeping()`` says what is asleep; the scheduler resumes only once the
  weights and the KV cache are both awake;
- one simulated GPU (``Device``): at start the weights plus the KV cache (vLLM's
  ``gpu_memory_utilization`` share of the card, or ``kv_cache_memory_bytes``) must fit, and the
  KV cache must hold one request of ``max_model_len`` tokens, with vLLM's own messages; waking
  maps the weights and the KV cache again and fails with an out-of-memory error when what else
  the device holds leaves no room.

Generation is real: the engine's own copy of the model (float32, on the CPU) samples with the
request's seed, temperature, top-k and top-p, and reports each sampled token's log-prob after
them (vLLM V1's ``processed_logprobs``), so the trainer's sampler-vs-policy gap is measured as on
the GPU. ``--plugin tests/plugins/cuda_standin.py --engine vllm-cuda-standin`` takes vLLM's own
options (``--vllm-sleep-level``, ``--vllm-gpu-memory``, ``--vllm-kv-cache-gb``).
"""
from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

from harness.rollouts import ENGINES, EngineEntry
from harness.rollouts.vllm_plan import Shape

GIB = 2**30
DEVICE_BYTES = 80 * GIB  # the simulated card: an 80 GB GPU, as the paper presets assume


class Device:
    """One simulated GPU's memory: ``total`` bytes, of which ``others()`` are held by what
    shares it (the training engine) and ``mapped`` by the vLLM engine, by tag."""

    def __init__(self, total: int = DEVICE_BYTES, others=lambda: 0) -> None:
        self.total, self.others = total, others
        self.mapped: dict[str, int] = {}

    def free(self) -> int:
        return self.total - self.others() - sum(self.mapped.values())

    def map(self, tag: str, size: int) -> None:
        if size > self.free():
            raise torch.OutOfMemoryError(
                f"CUDA out of memory: waking vLLM's {tag} needs {size / GIB:.2f} GiB, "
                f"{self.free() / GIB:.2f} GiB of {self.total / GIB:.2f} GiB free")
        self.mapped[tag] = size

    def unmap(self, tag: str) -> None:
        self.mapped.pop(tag, None)


class StrictCudaLLM:
    """``vllm.LLM``'s surface as ``VLLMRollout`` uses it, with the CUDA build's state rules."""

    def __init__(self, model, max_model_len: int, dtype_bytes: int = 2,
                 gpu_memory_utilization: float = 0.9, kv_cache_memory_bytes: int | None = None,
                 device: Device | None = None, enable_sleep_mode: bool = True) -> None:
        self.model = model.float().eval()
        self.max_model_len = max_model_len
        self.enable_sleep_mode = enable_sleep_mode
        self.device = device or Device()
        self.calls: list[str] = []
        self.asleep: set[str] = set()
        self.discarded = False  # a level-2 sleep dropped the weights
        self.checkpoint = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.llm_engine = SimpleNamespace(is_sleeping=lambda: bool(self.asleep))
        self.weights_bytes = sum(p.numel() for p in model.parameters()) * dtype_bytes
        per_token = Shape.of_config(model.config.to_dict()).kv_bytes_per_token(dtype_bytes)
        # vLLM's start-up: the share of the card it may use must be free, the weights load,
        # what is left of the share is the KV cache (or the size asked for)
        free = self.device.free()
        if kv_cache_memory_bytes:
            self.kv_bytes = kv_cache_memory_bytes
        else:
            wanted = int(gpu_memory_utilization * self.device.total)
            if free < wanted:
                raise ValueError(
                    f"Free memory on device ({free / GIB:.2f}/{self.device.total / GIB:.2f} "
                    f"GiB) on startup is less than desired GPU memory utilization "
                    f"({gpu_memory_utilization}, {wanted / GIB:.2f} GiB). Decrease GPU memory "
                    "utilization or reduce GPU memory used by other processes.")
            self.kv_bytes = wanted - self.weights_bytes
            if self.kv_bytes <= 0:
                raise ValueError("No available memory for the cache blocks. Try increasing "
                                 "`gpu_memory_utilization` when initializing the engine.")
        self.device.map("weights", self.weights_bytes)
        self.device.map("kv_cache", self.kv_bytes)
        self.kv_tokens = self.kv_bytes // per_token
        if self.kv_tokens < max_model_len:
            raise ValueError(
                f"To serve at least one request with the models's max seq len "
                f"({max_model_len}), ({max_model_len * per_token / GIB:.2f} GiB KV cache is "
                f"needed, which is larger than the available KV cache memory "
                f"({self.kv_bytes / GIB:.2f} GiB).")

        context: list[bool] = []  # vLLM's current config, set by the worker around a reload
        llm = self

        def runner_reload(weights_iterator=None, is_checkpoint_format=True):
            if not context:  # as vLLM 0.33, where a layer reads the config while it loads
                raise AssertionError("reload_weights outside set_current_vllm_config")
            llm._writable("reload_weights")
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, tensor in weights_iterator:
                    params[name].copy_(tensor.to(params[name].dtype))
            llm.discarded = False

        def worker_reload(*args, **kwargs):  # vLLM's Worker.reload_weights
            context.append(True)
            try:
                runner_reload(*args, **kwargs)
            finally:
                context.pop()

        served = _Served(model)
        runner = SimpleNamespace(model=served, get_model=lambda: served,
                                 reload_weights=runner_reload)
        self.worker = SimpleNamespace(model_runner=runner, reload_weights=worker_reload)

    # --- the state rules -------------------------------------------------------------------
    def _writable(self, what: str) -> None:
        if "weights" in self.asleep:
            raise RuntimeError(f"{what} into weights that are asleep (unmapped GPU memory): "
                               "an illegal memory access on a GPU")

    def sleep(self, level: int = 1) -> None:
        self.calls.append(f"sleep({level})")
        if not self.enable_sleep_mode:
            raise ValueError("Sleep mode is not enabled")
        self.asleep = {"weights", "kv_cache", "scheduling"}
        self.device.unmap("weights")
        self.device.unmap("kv_cache")
        if level == 2:  # the weights are discarded, not offloaded
            self.discarded = True
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan"))

    def wake_up(self, tags=None) -> None:
        self.calls.append(f"wake_up({','.join(tags) if tags else 'all'})")
        for tag in tags or ("weights", "kv_cache"):
            if tag in self.asleep and tag != "scheduling":
                self.device.map(tag, self.weights_bytes if tag == "weights" else self.kv_bytes)
        self.asleep -= set(tags or ("weights", "kv_cache", "scheduling"))
        if not self.asleep & {"weights", "kv_cache"}:
            self.asleep.discard("scheduling")  # resumed once everything else is awake

    def reset_prefix_cache(self) -> bool:
        self.calls.append("reset_prefix_cache")
        return True

    def collective_rpc(self, method, /, args=()):
        self.calls.append(f"collective_rpc({getattr(method, '__name__', method)})")
        if callable(method):
            return [method(self.worker, *args)]
        if method != "reload_weights":
            raise AttributeError(f"the stand-in's worker has no method {method!r}")
        self._writable("the checkpoint's reload")
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p.copy_(self.checkpoint[n])
        self.discarded = False
        return [None]

    # --- generation --------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts, /, sampling_params, use_tqdm=False):
        if self.asleep:
            raise RuntimeError(f"generate on a sleeping vLLM engine ({sorted(self.asleep)} "
                               "asleep): its scheduler is paused and the request would wait "
                               "forever")
        if self.discarded:
            raise RuntimeError("generate with the weights a level-2 sleep discarded: vLLM "
                               "would sample from uninitialised memory")
        params = sampling_params if isinstance(sampling_params, list) \
            else [sampling_params] * len(prompts)
        return [self._one(list(p["prompt_token_ids"]), sp) for p, sp in zip(prompts, params)]

    def _one(self, prompt: list[int], sp):
        if len(prompt) + sp.max_tokens > self.max_model_len:
            raise ValueError(f"prompt of {len(prompt)} tokens plus {sp.max_tokens} exceeds "
                             f"max_model_len {self.max_model_len}")
        if getattr(sp, "prompt_logprobs", None) is not None:
            logp = torch.log_softmax(self.model(input_ids=torch.tensor([prompt])).logits[0], -1)
            rows = [None] + [{t: SimpleNamespace(logprob=float(logp[i, t]))}
                             for i, t in enumerate(prompt[1:])]
            return SimpleNamespace(prompt_logprobs=rows, outputs=[])
        from harness.rollouts.lean import filter_logits

        gen = torch.Generator()
        greedy = sp.temperature == 0
        stops = set(sp.stop_token_ids or ())
        outputs = []
        for k in range(sp.n):  # vLLM: the k-th sample of a request draws with seed + k
            gen.manual_seed((sp.seed or 0) + k)
            ids, logps = list(prompt), []
            past = None
            step_in = torch.tensor([ids])
            for _ in range(sp.max_tokens):
                out = self.model(input_ids=step_in, past_key_values=past, use_cache=True)
                past, logits = out.past_key_values, out.logits[0, -1:].float()
                if greedy:
                    tok = int(logits.argmax())
                else:
                    kept = filter_logits(logits / sp.temperature, sp.top_k, sp.top_p)
                    lp = kept.log_softmax(-1)
                    tok = int(torch.multinomial(lp.exp(), 1, generator=gen))
                    logps.append({tok: SimpleNamespace(logprob=float(lp[0, tok]))})
                ids.append(tok)
                step_in = torch.tensor([[tok]])
                if tok in stops:
                    break
            outputs.append(SimpleNamespace(token_ids=ids[len(prompt):],
                                           logprobs=None if greedy or sp.logprobs is None
                                           else logps))
        return SimpleNamespace(outputs=outputs, prompt_logprobs=None)


class _Served(torch.nn.Module):
    """What the engine's worker reports as its model: the HF parameters by name, and the
    output head as vLLM's models compute it."""

    def __init__(self, model) -> None:
        super().__init__()
        self.hf = [model]  # in a list: not a submodule, so no parameter is listed twice

    def named_parameters(self, *a, **k):
        return self.hf[0].named_parameters()

    def parameters(self, *a, **k):
        return self.hf[0].parameters()

    def compute_logits(self, hidden):
        return hidden @ self.hf[0].get_output_embeddings().weight.T


def build(config, source, tokenizer, plain, context=None, device: Device | None = None):
    """The project's ``VLLMRollout`` over a ``StrictCudaLLM`` holding a copy of the model."""
    from harness.rollouts.base import eos_token_ids
    from harness.rollouts.vllm import VLLMRollout

    r = config.rollout
    model = plain()
    dtype_bytes = torch.finfo(getattr(torch, config.model.dtype)).bits // 8
    llm = StrictCudaLLM(copy.deepcopy(model), context or 4096, dtype_bytes,
                        r.vllm_gpu_memory, int(r.vllm_kv_cache_gb * GIB) or None, device)
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    engine = VLLMRollout(llm, tokenizer, eos_token_ids(eos, tokenizer),
                         r.vllm_sync_bucket_mb << 20, torch.float32, "cpu",
                         max_model_len=context or 4096, sleep_level=r.vllm_sleep_level,
                         expected_names={n for n, _ in model.named_parameters()}, sleep=True)
    engine.check_every, engine.tolerance = r.vllm_check_every, r.vllm_sync_tolerance
    return engine


def problems(config, here=True, cuda=None):
    return ["--engine vllm-cuda-standin samples on the CPU; drop --use-gpu"] \
        if config.training.use_gpu else []


if "vllm-cuda-standin" not in ENGINES:
    ENGINES.add("vllm-cuda-standin", EngineEntry(
        build, "the vLLM engine over a strict stand-in for vLLM 0.33's CUDA build (a test "
               "plugin)", sized=True,
        options=("vllm_gpu_memory", "vllm_kv_cache_gb", "vllm_sync_bucket_mb",
                 "vllm_sync_tolerance", "vllm_sleep_level", "vllm_check_every"),
        problems=problems))
