"""The policy's DeepSpeed engine and the few distributed helpers the trainer needs.

Each Ray Train worker (or the single test process) holds one engine. ZeRO-3 partitions the
parameters across workers; rollouts run on a plain copy of the model that receives the gathered
parameters, which is also how a colocated vLLM engine is fed.
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
from typing import Any, Iterator

import torch
import torch.distributed as dist

from harness.config import RunConfig
from harness.models import load_model


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order (small Python objects only)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def init_single_process(backend: str = "gloo") -> None:
    """A one-rank process group, for the in-process path (unit tests, ``bench step``): gloo on
    the CPU, nccl on a GPU (ZeRO-3 gathers CUDA tensors, which gloo's all-gather refuses)."""
    if dist.is_initialized():
        return
    # the launcher contract DeepSpeed's zero.Init reads, as torchrun would set it
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)


def device(use_gpu: bool) -> torch.device:
    """This worker's device: its local GPU (Ray Train sets LOCAL_RANK), else the CPU."""
    if not use_gpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--use-gpu was given but torch sees no CUDA device; on a CPU machine "
                           "pass --no-use-gpu (the smoke preset does)")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def gpu_used_gb() -> float:
    """GB in use on this worker's GPU, by any allocator (vLLM's included)."""
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, max(cap, 1)) + 1) if n % d == 0)


def ds_config(config: RunConfig, mini_batch: int) -> dict:
    """DeepSpeed config for one optimizer step per ``mini_batch`` responses on each worker."""
    t = config.training
    micro = largest_divisor_at_most(mini_batch, t.micro_batch_size)
    cfg = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": mini_batch // micro,
        "train_batch_size": mini_batch * world_size(),
        "gradient_clipping": t.grad_clip,
        "optimizer": {
            "type": "AdamW",
            # torch's AdamW: nothing to compile on CPU
            "params": {"lr": t.lr, "weight_decay": t.weight_decay, "torch_adam": True},
        },
        "zero_optimization": {"stage": t.zero_stage},
        "bf16": {"enabled": config.model.dtype == "bfloat16"},
        "fp16": {"enabled": config.model.dtype == "float16"},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    return cfg


def _skip_cpu_shm_build() -> None:
    """On CPU, DeepSpeed compiles a shared-memory comm op with g++ at first use (about a
    minute). gloo does not need it, so we replace the module-level builder with one that
    returns None. The module object must be patched in sys.modules: ``import ... as m`` binds
    another object on which the patch silently does nothing."""
    import deepspeed.comm.torch  # noqa: F401

    module = sys.modules["deepspeed.comm.torch"]
    if hasattr(module, "build_shm_op"):
        module.build_shm_op = lambda: None


def import_deepspeed():
    """``import deepspeed``, without the MLflow import it does for its autotuner.

    DeepSpeed's autotuner imports MLflow at import time, when MLflow is installed, to log
    autotuning experiments, which a harness run never starts; that import took 1.5 of the 1.9 s
    DeepSpeed's import costs a worker here (MLflow is installed for ``--report-to mlflow``). It
    is hidden for that one import only; ``--report-to mlflow`` imports MLflow itself later.
    """
    import sys

    if "deepspeed" in sys.modules:
        return sys.modules["deepspeed"]
    hide = "mlflow" not in sys.modules
    if hide:
        sys.modules["mlflow"] = None  # `import mlflow` raises ImportError: has_mlflow = False
    try:
        import deepspeed
    finally:
        if hide and sys.modules.get("mlflow", 0) is None:
            del sys.modules["mlflow"]
    return deepspeed


def build_engine(config: RunConfig, mini_batch: int, source: str | None = None,
                 trainable=None):
    """(engine, ds_config) for the policy loaded from ``source`` (default: the config's model).
    ZeRO-3 partitions while loading. ``trainable(model)``: sets ``requires_grad`` (the rest is
    frozen and left out of the optimizer)."""
    deepspeed = import_deepspeed()
    if not config.training.use_gpu:
        _skip_cpu_shm_build()
    # DeepSpeed reads the world size from its own comm layer: wrap the process group that
    # Ray Train (or init_single_process) created before any DeepSpeed config is parsed.
    deepspeed.init_distributed(dist_backend="nccl" if config.training.use_gpu else "gloo")
    cfg = ds_config(config, mini_batch)
    keep = None
    if config.training.zero_stage == 3:
        from transformers.integrations import HfDeepSpeedConfig

        keep = HfDeepSpeedConfig(cfg)  # must live while the model is built: zero.Init
    model = load_model(source or config.model.model, seed=config.seed,
                       allow_download=config.model.allow_download, dtype=config.model.dtype)
    model.config.use_cache = False
    if config.training.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if trainable is not None:
        trainable(model)
    engine, *_ = deepspeed.initialize(model=model,
                                      model_parameters=[p for p in model.parameters()
                                                        if p.requires_grad],
                                      config=cfg, dist_init_required=False)
    del keep
    return engine, cfg


def placement() -> dict:
    """Where this rank runs: its Ray node id (``local`` outside Ray) and host name."""
    import socket

    import ray

    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
    return {"rank": rank(), "node": node, "host": socket.gethostname()}


@contextlib.contextmanager
def gathered_parameters(module, named=None) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Full (name, tensor) pairs of a possibly ZeRO-3-partitioned module, for weight sync.
    ``named``: only these (name, parameter) pairs of it (a bucket), gathered together."""
    deepspeed = import_deepspeed()
    named = list(module.named_parameters()) if named is None else list(named)
    with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None):
        yield [(n, p.data) for n, p in named]
