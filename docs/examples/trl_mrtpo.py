"""MRTPO as the advantage of TRL's GRPOTrainer: two steps on the embedded SmolLM2-135M-Instruct
with the instruction-following task's rewards (one per constraint), on a CPU
(docs/integrations.md). The untrained model already meets some constraints and misses others,
so its groups carry signal from the first step.

    .venv/bin/python docs/examples/trl_mrtpo.py [METHOD [MODEL]]   # default: mrtpo, the embedded model

METHOD: any registered name or composition (gdpo, saw, mrtpo+saw, ...); MODEL: what --model
takes (tiny-random: a 2-layer model, seconds instead of minutes).
"""
import sys
import tempfile

from trl import GRPOConfig

from harness.integrations.trl import MethodGRPOTrainer, dataset, reward_functions
from harness.models import load_model, load_tokenizer
from tasks import TASKS, TRAIN_SETS

method = sys.argv[1] if len(sys.argv) > 1 else "mrtpo"
model = sys.argv[2] if len(sys.argv) > 2 else "smollm2-135m-instruct"
task = TASKS.get("ifeval")
examples = TRAIN_SETS.get("if-synth").load(None, 0)[:4]  # offline prompts with constraints
by_id = {ex.id: ex for ex in examples}

with tempfile.TemporaryDirectory() as out:
    args = GRPOConfig(output_dir=out, per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=48, max_steps=2, learning_rate=1e-5, beta=0.0,
                      use_cpu=True, bf16=False, report_to=[], save_strategy="no",
                      logging_steps=1, disable_tqdm=True, seed=0)
    trainer = MethodGRPOTrainer(
        model=load_model(model), args=args, train_dataset=dataset(examples),
        processing_class=load_tokenizer(model),
        reward_funcs=reward_functions(task, by_id),  # one per reward, named as it
        method=method,  # TRL's conventions; methods.options(...) sets the method's options
        examples=by_id,  # what MRTPO replays: each prompt's verifier information
        reward_bounds=[(rw.lo, rw.hi) for rw in task.rewards])
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    for row in trainer.state.log_history:
        if "loss" in row:
            print({k: round(v, 4) for k, v in row.items()
                   if k in ("step", "loss", "reward", "frac_reward_zero_std",
                            "method/alloc/kept")})
    # TRL's completions log holds the method's advantage of each completion (last batch)
    print("advantages:", [round(a, 3) for a in trainer._logs["advantages"]])
    moved = max(float((p.detach() - b).abs().max())
                for p, b in zip(trainer.model.parameters(), before))
    print(f"largest weight change: {moved:.3g}")
