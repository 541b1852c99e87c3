"""SAW (or any sequence-level method) as a verl advantage estimator, on a batch laid out as
verl's trainer hands it to ``compute_advantage`` (docs/integrations.md). In verl's environment:

    bash scripts/setup.sh --verl
    .venv-verl/bin/python docs/examples/verl_saw.py [METHOD]
"""
import sys

import numpy as np
import torch
from verl import DataProto
from verl.trainer.config import AlgoConfig

from harness.integrations import verl as adapter


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """A verl reward function with two rewards: verl puts ``score`` on the last token and the
    other keys in ``reward_extra_info``, one array per key in ``non_tensor_batch``."""
    fmt = float(solution_str.startswith("<answer>") and solution_str.endswith("</answer>"))
    correct = float(ground_truth in solution_str)
    return {"score": fmt + correct, "format": fmt, "correct": correct}


method = sys.argv[1] if len(sys.argv) > 1 else "saw"
# algorithm.adv_estimator is this name: "harness:saw"
name = adapter.register(method, ["format", "correct"])

# two prompts, four responses each (rollout.n = 4); verl's uid marks a prompt's group
prompts = [("What is 2 + 2?", "4"), ("Capital of France?", "Paris")]
responses = ["<answer>4</answer>", "<answer>5</answer>", "4", "I think it is 22",
             "<answer>Paris</answer>", "Paris", "<answer>Lyon</answer>", "Paris, France"]
rows = [(p, gt, r) for (p, gt), group in zip(prompts, (responses[:4], responses[4:]))
        for r in group]
scores = [compute_score("demo", r, gt) for _, gt, r in rows]
lengths = torch.tensor([len(r.split()) + 2 for _, _, r in rows])  # stand-in token counts
width = int(lengths.max())
mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
data = DataProto.from_dict(
    tensors={"token_level_rewards": torch.zeros(len(rows), width), "response_mask": mask},
    non_tensors={"uid": np.array([p for p, _, _ in rows], dtype=object),
                 "format": np.array([s["format"] for s in scores], dtype=object),
                 "correct": np.array([s["correct"] for s in scores], dtype=object)})

# what verl's trainer calls, with the per-reward scores passed on to the estimator
data = adapter.compute_advantage(data, name, config=AlgoConfig(adv_estimator=name))
for (_, _, response), s, a in zip(rows, scores, data.batch["advantages"][:, 0].tolist()):
    print(f"{method:>6}  format {s['format']:.0f}  correct {s['correct']:.0f}  "
          f"advantage {a:+.3f}  {response}")
