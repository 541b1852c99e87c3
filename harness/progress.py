"""Console progress of a run: a bar over training steps, then one over evaluation items."""
from __future__ import annotations

from harness.config import RunConfig


class Bars:
    """Progress bars for one seed; ``tqdm_cls`` is tqdm, or Ray's tqdm inside Ray workers
    (which draws on the driver's console instead of interleaving worker log lines)."""

    def __init__(self, config: RunConfig, tqdm_cls) -> None:
        self.tqdm_cls = tqdm_cls
        self.label = f"{config.method.method} seed {config.seed}"
        self.train = tqdm_cls(total=config.training.steps, desc=f"{self.label} train")
        self.evaluation = None

    def step(self, metrics: dict) -> None:
        shown = [f"{k.split('/')[-1]} {v:.2f}" for k, v in metrics.items()
                 if k.startswith("reward/") and v == v]  # NaN: a reward no prompt had
        shown.append(f"{metrics.get('time/step', 0.0):.1f} s/step")
        # Ray's tqdm has set_description but no set_postfix
        self.train.set_description(f"{self.label} train | {', '.join(shown)}")
        self.train.update(1)

    def eval(self, n: int) -> None:
        if self.evaluation is None:
            self.evaluation = self.tqdm_cls(desc=f"{self.label} eval (rank 0 items)")
        self.evaluation.update(n)

    def close(self) -> None:
        self.train.close()
        if self.evaluation is not None:
            self.evaluation.close()


def plain_bars(config: RunConfig) -> Bars:
    from tqdm import tqdm

    return Bars(config, tqdm)


def ray_bars(config: RunConfig) -> Bars:
    from ray.experimental.tqdm_ray import tqdm

    return Bars(config, tqdm)
