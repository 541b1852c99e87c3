"""Experiment trackers (``--report-to``, TRL's word for it): TensorBoard, Weights & Biases and
MLflow receive every per-step metric of the training log (evaluations during training too),
the final evaluation, the resolved config as hyperparameters and the code's provenance
(commit, dirty flag, fingerprint) as tags. Each is written by its own library, on rank 0 of the
training workers, beside the seed's result:

- tensorboard: ``<run folder>/tensorboard/seed<k>/`` (``torch.utils.tensorboard``; a resumed
  seed purges the steps after its checkpoint, so a killed run's extra steps do not linger; a
  seed that starts again from step 0 starts its folder afresh);
- mlflow: experiment ``<task>/<method>/<model>/<setting>``, run ``seed<k>``, in
  ``--mlflow-tracking-uri``, else MLflow's own ``MLFLOW_TRACKING_URI``, else
  ``sqlite:///<run folder>/mlflow.db`` (MLflow 3's local store: its file store is in
  maintenance mode and refuses to start by default); a resumed seed continues its run, one
  started again from step 0 is a new run (a dead attempt's is marked KILLED);
- wandb: ``<run folder>/wandb/``, offline unless the machine is logged in (then online, to the
  logged-in entity), project ``rl-harness``, one run id per attempt of a seed (kept in
  ``wandb/seed<k>.run-id``) so a resume continues it and a start from step 0 begins a new run.

The libraries are optional extras (``pip install -e '.[tensorboard]'`` etc.; the CPU setup
installs tensorboard and mlflow); naming one that is not installed fails before Ray starts.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import shutil
import time
from pathlib import Path
from typing import Protocol

# name -> (module imported to check it is installed, the extra that installs it)
BACKENDS = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow"),
            "wandb": ("wandb", "wandb")}
WANDB_PROJECT = "rl-harness"  # the W&B project every run goes to


def parse(report_to: str) -> tuple[str, ...]:
    """``tensorboard,mlflow`` -> ("tensorboard", "mlflow"); ``none`` or "" -> (); ValueError
    naming the known ones on anything else."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in report_to.split(",") if n.strip()))
    if names in ((), ("none",)):
        return ()
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or "none" in names:
        raise ValueError(f"--report-to {report_to!r}: unknown tracker(s) "
                         f"{unknown or ['none mixed with others']}; use a comma-separated list of "
                         f"{', '.join(BACKENDS)}, or none")
    return names


def problems(report_to: str) -> list[str]:
    """What stops ``--report-to`` before anything starts: unknown names, missing libraries
    (each with the extra that installs it)."""
    try:
        names = parse(report_to)
    except ValueError as exc:
        return [str(exc)]
    out = []
    for n in names:
        module, extra = BACKENDS[n]
        if importlib.util.find_spec(module) is None:
            out.append(f"--report-to {n}: the {module} package is not installed; install the "
                       f"extra with `.venv/bin/pip install -e '.[{extra}]'`, or leave {n} out "
                       "(--report-to none turns tracking off)")
    return out


def scalars(row: dict) -> dict[str, float]:
    """The loggable numbers of a log row or metrics dict (no step, no bools, no NaN)."""
    return {k: float(v) for k, v in row.items() if k != "step" and isinstance(v, (int, float))
            and not isinstance(v, bool) and not math.isnan(float(v))}


def flat_config(config_dict: dict) -> dict[str, str]:
    """The resolved config as flat ``section.field`` -> text hyperparameters."""
    out = {}
    for key, value in config_dict.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": str(v) for k, v in value.items()})
        else:
            out[key] = str(value)
    return out


class Backend(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...
    def close(self) -> None: ...


class TensorBoard:
    def __init__(self, folder: Path, seed: int, hparams: dict, tags: dict, start_step: int):
        from torch.utils.tensorboard import SummaryWriter

        logdir = folder / "tensorboard" / f"seed{seed}"
        if not start_step and logdir.is_dir():
            # the seed starts again from step 0 (a rerun after a failure, --force): an earlier
            # attempt's event file would show as the same run, its steps mixed with these
            shutil.rmtree(logdir)
        # purge_step: events at or after it from a killed run's file are dropped on resume
        self.writer = SummaryWriter(str(logdir), purge_step=start_step + 1 if start_step else None)
        if not start_step:
            self.writer.add_text("config", "\n".join(f"    {k} = {v}"
                                                     for k, v in sorted(hparams.items())))
            self.writer.add_text("provenance", "\n".join(f"    {k} = {v}"
                                                         for k, v in sorted(tags.items())))

    def log(self, metrics: dict[str, float], step: int) -> None:
        for k, v in metrics.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()  # a killed run keeps every step it logged

    def close(self) -> None:
        self.writer.close()


class MLflow:
    def __init__(self, folder: Path, experiment: str, seed: int, hparams: dict, tags: dict,
                 tracking_uri: str, start_step: int = 0):
        from mlflow.tracking import MlflowClient

        uri = (tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
               or f"sqlite:///{folder.resolve() / 'mlflow.db'}")
        self.client = MlflowClient(uri)
        exp = self.client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(experiment)
        name = f"seed{seed}"
        found = self.client.search_runs([exp_id], f"tags.mlflow.runName = '{name}' and "
                                                  f"tags.fingerprint = '{tags['fingerprint']}'",
                                        max_results=1, order_by=["attributes.start_time DESC"])
        if found and found[0].info.status != "FINISHED" and start_step:
            self.run_id = found[0].info.run_id  # a resume continues its run
        else:
            if found and found[0].info.status == "RUNNING":  # an attempt that died: closed
                self.client.set_terminated(found[0].info.run_id, status="KILLED")
            self.run_id = self.client.create_run(exp_id, run_name=name, tags=tags).info.run_id
            # MLflow caps a parameter value at 6000 characters
            for k, v in hparams.items():
                self.client.log_param(self.run_id, k, v[:6000])

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        # MLflow's metric names allow "/" but not every character: keep ours as they are
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step)
                                                    for k, v in metrics.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def wandb_logged_in() -> bool:
    """What ``wandb login`` leaves: a key in the environment or in ~/.netrc for api.wandb.ai
    (read without a network call)."""
    import netrc

    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


class Wandb:
    def __init__(self, folder: Path, experiment: str, seed: int, hparams: dict, tags: dict,
                 start_step: int = 0):
        import wandb

        logged_in = wandb_logged_in()
        # one id per attempt of a seed (setting and code version in it): a resume continues
        # the attempt's run, a start from step 0 begins a new one
        id_file = folder / "wandb" / f"seed{seed}.run-id"
        run_id = id_file.read_text().strip() if start_step and id_file.is_file() else ""
        if not run_id:
            run_id = hashlib.sha256(f"{experiment}/seed{seed}/{tags['fingerprint']}/"
                                    f"{time.time_ns()}".encode()).hexdigest()[:16]
            id_file.parent.mkdir(parents=True, exist_ok=True)
            id_file.write_text(run_id + "\n")
        self.run = wandb.init(project=WANDB_PROJECT, name=f"{experiment}/seed{seed}",
                              id=run_id, resume="allow", dir=str(folder),
                              mode=None if logged_in else "offline",
                              config=hparams, tags=[tags["commit"][:12]],
                              settings=wandb.Settings(silent=True))
        self.run.summary.update(tags)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


class Trackers:
    """The backends ``--report-to`` names, opened for one seed (rank 0 only)."""

    def __init__(self, config, folder: Path, experiment: str, provenance: dict,
                 start_step: int = 0):
        hparams = flat_config(config.to_dict())
        tags = {"commit": str(provenance.get("commit", "")),
                "dirty": str(bool(provenance.get("dirty"))),
                "fingerprint": str(provenance.get("fingerprint", ""))}
        folder.mkdir(parents=True, exist_ok=True)
        self.backends: list[Backend] = []
        for name in parse(config.training.report_to):
            if name == "tensorboard":
                self.backends.append(TensorBoard(folder, config.seed, hparams, tags, start_step))
            elif name == "mlflow":
                self.backends.append(MLflow(folder, experiment, config.seed, hparams, tags,
                                            config.training.mlflow_tracking_uri, start_step))
            else:
                self.backends.append(Wandb(folder, experiment, config.seed, hparams, tags,
                                           start_step))

    def log(self, row: dict, step: int) -> None:
        metrics = scalars(row)
        if metrics:
            for b in self.backends:
                b.log(metrics, step)

    def close(self) -> None:
        for b in self.backends:
            b.close()
