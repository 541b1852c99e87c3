"""One GRPOTrainer step of a method with passes under two TRL processes (CPU, gloo), run by
``torchrun --nproc_per_node 2 tests/scripts/trl_two_processes.py METHOD OUT`` from
tests/test_trl_options.py: each process writes what it computed on its own rows (its rows'
scores, the tokens it trains, its passes' outputs) and the advantages TRL then trained with."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.integrations import trl as adapter  # noqa: E402
from harness.plugins import load_plugins  # noqa: E402


def main(method: str, out: str) -> None:
    from trl import GRPOConfig

    from harness.models import load_model, load_tokenizer
    from tasks import TASKS, TRAIN_SETS

    load_plugins([str(ROOT / "tests" / "plugins" / "toy_task.py")])
    task = TASKS.get("toy")
    examples = TRAIN_SETS.get("toy-train").load(None, 0)[:8]
    by_id = {e.id: e for e in examples}
    args = GRPOConfig(output_dir=out, per_device_train_batch_size=8, num_generations=4,
                      gradient_accumulation_steps=1, max_completion_length=8, max_steps=1,
                      learning_rate=1e-3, use_cpu=True, bf16=False, report_to=[],
                      save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
                      beta=0.0)
    trainer = adapter.MethodGRPOTrainer(
        model=load_model("tiny-random", seed=3), args=args,
        train_dataset=adapter.dataset(examples), processing_class=load_tokenizer("tiny-random"),
        reward_funcs=adapter.reward_functions(task, by_id), method=method, examples=by_id,
        reward_bounds=[(rw.lo, rw.hi) for rw in task.rewards])
    record: dict = {"processes": trainer.accelerator.num_processes}
    passes, step = trainer._passes, trainer._generate_and_score_completions

    def spy_passes(rows, completions, ids, seen, rewards, g):
        got = passes(rows, completions, ids, seen, rewards, g)
        record.update(passes={k: v.clone() for k, v in got.items()}, rewards=rewards.clone())
        return got

    def spy_step(inputs):
        got = step(inputs)
        if trainer.model.training:
            mask = got["completion_mask"]
            record.update(advantages=got["advantages"].cpu(), trained=mask.cpu())
        return got

    trainer._passes, trainer._generate_and_score_completions = spy_passes, spy_step
    trainer.train()
    torch.save(record, Path(out) / f"rank{trainer.accelerator.process_index}.pt")
    # The process group is closed before the interpreter exits: left to exit, gloo's threads
    # may be destroyed while joinable and abort the process (SIGABRT, 1 run in about 12).
    trainer.accelerator.wait_for_everyone()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
