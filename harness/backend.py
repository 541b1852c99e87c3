"""Ray Train backend: one TorchTrainer per seed runs ``train_worker`` on N workers.

Ray start-up costs ~30 s, so the whole RL loop of a seed runs inside one ``fit``. Each worker
gets ``cpus // workers`` CPU threads; gloo on CPU, nccl on GPU (Ray Train sets up the process
group, DeepSpeed reuses it).
"""
from __future__ import annotations

from dataclasses import replace

import os
import tempfile
import uuid
from pathlib import Path

from harness import orphan
from harness import run as runs
from harness.config import RunConfig


def usable_cpus() -> int:
    """The cores this process may run on: its affinity mask (``taskset``, a cgroup cpuset),
    not the machine's count, so that a run pinned to one core uses one thread and does not
    oversubscribe a core shared with another job."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _worker_entry(loop_config: dict) -> None:
    from harness import startup

    clock = startup.Clock(loop_config["startup"])
    clock.mark("worker_entry")
    import torch

    from harness.console import quiet
    from harness.console.progress import worker_reporter
    from harness.trainer import train_worker

    from harness.checkpoints.store import RayCheckpointer

    orphan.arm()  # an orphan of a killed job stops instead of storing the seed's result
    quiet.configure_process()
    torch.set_num_threads(loop_config["threads"])
    # the driver's resolution again, from the stored config (its plugins loaded first)
    resolved = runs.from_stored(loop_config["config"])
    # the seed's files, with the config as this resolution made it
    run = replace(loop_config["run"], config=resolved.config)
    from harness import engine as eng

    if eng.rank() == 0:  # before any training: the result must land on the driver's disk
        check_driver_disk(Path(loop_config["driver_token"]), eng.placement())
    clock.mark("worker_imported")
    train_worker(resolved, reporter_factory=worker_reporter, checkpointer=RayCheckpointer(),
                 run=run, clock=clock)


def _sft_entry(loop_config: dict) -> None:
    import torch

    from harness.console import quiet
    from harness.console.progress import worker_reporter
    from harness.warmstart.sft import sft_worker

    orphan.arm()  # an orphan of a killed job stops instead of writing the warm start
    quiet.configure_process()
    torch.set_num_threads(loop_config["threads"])
    sft_worker(runs.from_stored(loop_config["config"]), loop_config["probe"],
               reporter_factory=worker_reporter, probe_steps=tuple(loop_config["probe_steps"]))


# Ray's periodic work that a local instance of one machine does not need at the default rate:
# metrics export and event-loop statistics off, resource reports and health checks less often
# (they serve autoscaling and node failure detection across machines). Idle, a local Ray with
# six actors took 4.2 % of two cores with the defaults and 3.8 % with these (bench launch has
# the effect on a run).
LOCAL_SYSTEM_CONFIG = {
    "enable_metrics_collection": False, "event_stats": False,
    "raylet_report_resources_period_milliseconds": 1000, "health_check_period_ms": 10000,
    "gcs_pull_resource_loads_period_milliseconds": 5000,
    "raylet_check_gc_period_milliseconds": 10000,
}
# Ray Train's own settings, which it reads from the environment of its actors only (set here
# for this job's processes, never read by the harness). The preemption watcher polls for cloud
# spot-instance notices, which a local instance never gets.
LOCAL_TRAIN_ENV = {"RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


def start_ray(num_cpus: int | None = None, address: str = "") -> None:
    """A local Ray instance sized to this machine's usable CPUs (with ``LOCAL_SYSTEM_CONFIG``
    and ``LOCAL_TRAIN_ENV``), or (``address``) the running cluster at that address (``auto``:
    the one this node belongs to), whose resources and settings are the cluster's own."""
    import ray

    from harness.console import quiet

    quiet.configure_process()
    if not ray.is_initialized():
        # workers' and Ray's actors' output goes to Ray's log files only; progress comes
        # through harness.console.progress and failures through fit's exception
        common = dict(log_to_driver=False, configure_logging=True, logging_level="warning")
        if address:
            ray.init(address=address, **common)
        else:
            os.environ.update(LOCAL_TRAIN_ENV)  # the controller actor inherits the driver's
            # "local": a new instance even when a cluster started with `ray start` runs on this
            # machine (without it Ray joins that cluster, and refuses num_cpus there)
            ray.init(address="local", num_cpus=num_cpus or usable_cpus(), include_dashboard=False,
                     _system_config=LOCAL_SYSTEM_CONFIG,
                     runtime_env={"env_vars": LOCAL_TRAIN_ENV}, **common)


def worker_resources(config: RunConfig) -> dict:
    """What Ray reserves for each training worker: CPUs (also its torch threads) and, with
    --use-gpu, GPUs."""
    t = config.training
    cpus = t.cpus_per_worker or max(1, usable_cpus() // t.workers)
    out = {"CPU": cpus}
    if t.use_gpu:
        out["GPU"] = t.gpus_per_worker
    return out


def _fit(entry, config: RunConfig, storage: Path | None = None, **payload) -> None:
    """One Ray Train fit of ``entry`` on the config's workers. ``storage``: the seed's
    checkpoint folder (a fixed run name there resumes from its latest complete checkpoint);
    None: a fresh temporary one, nothing to resume."""
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from harness.results import stored_config
    from harness.seedrun import RUN_NAME

    t = config.training
    resources = worker_resources(config)
    if storage is None:
        # a unique name: reusing one in the same storage would resume the old run
        name, storage = f"harness-{uuid.uuid4().hex[:12]}", Path(tempfile.mkdtemp(
            prefix="harness-ray-"))
    else:
        name = RUN_NAME
    from harness import startup

    startup.mark("fit_called", again=True)
    trainer = TorchTrainer(
        entry,
        # the method section as a result stores it (the run's own method's options): a field
        # of a plugin this driver loaded for another run would be unknown to the workers
        # startup: the driver's clock and marks, for the worker's own (harness.startup)
        train_loop_config={"config": stored_config(config), "threads": resources["CPU"],
                           "startup": startup.handoff(), **payload},
        scaling_config=ray.train.ScalingConfig(
            num_workers=t.workers, use_gpu=t.use_gpu, resources_per_worker=resources,
            placement_strategy=t.placement_strategy),
        torch_config=TorchConfig(backend="nccl" if t.use_gpu else "gloo"),
        run_config=ray.train.RunConfig(
            name=name, storage_path=str(storage),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=t.keep_checkpoints),
            failure_config=ray.train.FailureConfig(max_failures=t.max_failures)),
    )
    from harness.console.progress import run_with_progress
    from harness.console.quiet import ray_log_hint

    try:
        run_with_progress(trainer.fit)
    except Exception as exc:
        raise RuntimeError(f"the Ray Train run failed: {exc}\n(the workers' own output is in "
                           f"{ray_log_hint()})") from exc


def warm_start(run, probe_prompts: int = 0, probe_steps: tuple[int, ...] = ()) -> Path:
    """Train the run's warm start with Ray Train unless its folder is cached; its path (the
    check before Ray refused demonstrations that are benchmark items)."""
    from harness.warmstart import cache

    path = run.warm_start_folder
    if cache.is_complete(path):
        return path
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    # seeds started side by side share one warm start: the second waits for the first's
    with FileLock(str(path) + ".lock"):
        if not cache.is_complete(path):
            _fit(_sft_entry, run.config, probe=probe_prompts, probe_steps=list(probe_steps))
    if not cache.is_complete(path):
        raise RuntimeError(f"the warm start finished but {path} was not written; see the worker "
                           "logs")
    return path


def driver_token(folder: Path) -> Path:
    """A file the driver writes in the seed's results folder before the fit: rank 0 writes the
    result there, and the driver then reads it from its own disk."""
    folder.mkdir(parents=True, exist_ok=True)
    token = folder / f".driver-{uuid.uuid4().hex[:12]}"
    token.write_text(f"{os.uname().nodename}\n")
    return token


def check_driver_disk(token: Path, where: dict) -> None:
    """On rank 0, before training: raise unless the driver's token is visible here, i.e. the
    results folder is the driver's (shared storage, or the driver's own node). Otherwise the
    result would be written on this node's disk and a seed of hours would end in "training
    finished but ... was not written"."""
    if not token.is_file():
        raise RuntimeError(
            f"the results folder {token.parent} is not the driver's here on rank 0's node "
            f"({where.get('node', 'unknown')}): rank 0 writes the seed's result there and the "
            "driver reads it from its own disk. Give --results-dir a folder on storage every "
            "node shares (as --checkpoint-dir must be), or run the driver on rank 0's node")


def train_seed(config: RunConfig, run=None) -> Path:
    """Train + evaluate one seed with Ray Train; returns the stored result's path. ``run``:
    the seed's ``SeedRun`` (made from ``config`` when not given)."""
    from harness.seedrun import SeedRun

    run = run or SeedRun.of(config)
    # a stored seed run again (--force) starts from step 0; a missing one resumes from the
    # latest complete checkpoint of an earlier, killed run of the same settings
    storage = run.prepare_checkpoints(fresh=run.result.is_file())
    # the code it starts (or resumes) under, kept through resumes, and its workers' threads
    run.record_start(threads=worker_resources(config)["CPU"])
    token = driver_token(run.folder)
    try:
        # the seed's files without its config: a worker resolves that from the stored form,
        # its plugins loaded first (a plugin method's options object unpickles only then)
        _fit(_worker_entry, config, storage=storage, run=replace(run, config=None),
             driver_token=str(token))
    finally:
        token.unlink(missing_ok=True)
    if not run.result.is_file():
        raise RuntimeError(f"training finished but {run.result} was not written; see the "
                           "worker logs")
    run.clear_checkpoints()  # the result is stored: its checkpoints are no longer needed
    return run.result
