"""Any registered method as the advantage of TRL's ``GRPOTrainer`` (trl 1.16.0, the ``trl``
extra), without a fork (docs/integrations.md).

TRL computes each reward function's score per completion (``_calculate_rewards``: a ``[N, K]``
tensor gathered over processes) and folds them into one advantage per completion in
``_generate_and_score_completions``; its loss takes advantages of shape ``[B]`` or ``[B, T]``
(``_compute_loss`` unsqueezes only a 1-D one). :class:`MethodGRPOTrainer` overrides those two
methods and nothing else: the first keeps the gathered per-reward scores (and the rows they
score), the second replaces TRL's advantages with the method's ``[B, T]`` token advantages,
computed by the same code the harness trains with (:func:`advantages`: a ``RolloutBatch`` of the
scores, groups of ``num_generations``, the completions' mask, the method's passes). A method
with passes (the token-level ones) runs them on TRL's own model, before its update, through the
harness's ``PolicyContext``; the rows it replays are the harness's
``Example``s, found by the dataset's ``example_id`` column (:func:`dataset` builds one).

TRL's own normalisation is bypassed, so ``scale_rewards`` and ``multi_objective_aggregation``
do not apply; the method's ``--conventions`` (``trl`` for TRL's epsilons) and ``--whiten`` do.
``loss_type`` and the clipping stay TRL's.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch

import methods
from methods import RolloutBatch


def reward_functions(task, examples: Mapping[str, Any]) -> list:
    """One TRL reward function per reward of ``task`` (named as the reward), each scoring a
    completion against the ``Example`` its dataset row names (``example_id``)."""
    def make(k: int):
        def fn(completions, example_id, **_):
            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
            rows = task.compute_rewards([examples[i] for i in example_id], texts)
            return [None if row[k] != row[k] else float(row[k]) for row in rows]  # NaN: absent
        fn.__name__ = task.rewards[k].name
        return fn

    return [make(k) for k in range(len(task.rewards))]


def dataset(examples: Sequence[Any]):
    """A ``datasets.Dataset`` TRL reads: each example's chat ``prompt`` and its ``example_id``."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [dict(m) for m in ex.messages], "example_id": ex.id}
                              for ex in examples])


def batch_of(rewards: torch.Tensor, lengths: Sequence[int], group_size: int,
             reward_names: Sequence[str], bounds: Sequence[tuple[float, float]],
             passes: Optional[dict] = None, step: int = 0, total_steps: int = 1) -> RolloutBatch:
    """The harness's batch of TRL's scores: rows in TRL's order, ``group_size`` consecutive
    rows per prompt (TRL's ``RepeatSampler``), ``lengths`` valid tokens each; ``step`` of
    ``total_steps`` for the methods' schedules (CoRT's warm-up)."""
    n = rewards.shape[0]
    if n % group_size:
        raise ValueError(f"{n} completions are not whole groups of {group_size}")
    width = max(1, max(lengths))
    mask = (torch.arange(width)[None, :] < torch.tensor(list(lengths))[:, None]).long()
    return RolloutBatch(rewards=rewards.float().cpu(), reward_names=tuple(reward_names),
                        reward_bounds=tuple(tuple(b) for b in bounds),
                        group=torch.arange(n) // group_size, response_mask=mask,
                        passes=dict(passes or {}), step=int(step),
                        total_steps=max(1, int(total_steps)))


def advantages(method: str, batch: RolloutBatch, options=None) -> tuple[torch.Tensor, dict]:
    """``[N, T]`` token advantages of ``method`` on ``batch`` and its metrics (the harness's own
    computation: ``methods.compute``)."""
    out = methods.compute(method, batch, options if options is not None else methods.options())
    return out.scores, out.metrics


def _trainer_base():
    try:
        from trl import GRPOTrainer
    except ImportError as e:
        raise ImportError("the TRL integration needs TRL: pip install -c "
                          "requirements/constraints-cpu.txt -e '.[trl]' (trl 1.16.0)") from e
    return GRPOTrainer


class _Lazy(type):
    """Builds :class:`MethodGRPOTrainer` on first use, so importing this module needs no TRL."""

    def __call__(cls, *args, **kwargs):
        return _make()(*args, **kwargs)


def _make():
    base = _trainer_base()

    class MethodGRPOTrainer(base):
        """``GRPOTrainer`` whose advantages are a registered method's.

        Extra arguments: ``method`` (required: a registered name or a composition ``a+b``),
        ``method_options`` (``methods.options(...)``; default: every method's defaults),
        ``examples`` ({example_id: Example}: what passes replay; needed by methods with
        passes), ``reward_bounds`` ([(lo, hi)] per reward function; default (0, 1)).
        """

        def __init__(self, *args, method: str, method_options=None,
                     examples: Optional[Mapping[str, Any]] = None,
                     reward_bounds: Optional[Sequence[tuple[float, float]]] = None, **kwargs):
            self.method = methods.get(method)  # unknown names fail before the model loads
            self.method_name = method
            self.method_options = method_options if method_options is not None \
                else methods.options()
            problems = self.method.problems(self.method_options)
            if problems:
                raise ValueError(f"method {method!r}: " + "; ".join(problems))
            if self.method.loss_terms or not self.method.pg_term:
                raise ValueError(f"method {method!r} adds loss terms ("
                                 f"{', '.join(t.name for t in self.method.loss_terms)}), which "
                                 "this integration does not add to TRL's loss; use a method "
                                 "whose terms are advantages, or train it with the harness")
            self.examples = dict(examples or {})
            if self.method.passes and not self.examples:
                raise ValueError(f"method {method!r} runs passes ({', '.join(self.method.needs)})"
                                 " over the harness's Examples: give examples={example_id: "
                                 "Example} and an example_id column in the dataset")
            self._bounds = reward_bounds
            self._scored: Optional[tuple] = None
            super().__init__(*args, **kwargs)
            if self.method.passes and self.accelerator.num_processes > 1:
                raise ValueError(f"method {method!r} runs passes, which this integration runs "
                                 "in one process only (a group may span TRL's processes)")
            # the policy before training, for passes that read it (a copy, never trained)
            self._initial = None
            if "initial" in self.method.models(self.method_options):
                import copy

                self._initial = copy.deepcopy(self.accelerator.unwrap_model(self.model)).eval()

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions,
                                                 completion_ids_list)
            self._scored = (rewards, inputs, completions)
            return rewards

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            rewards, rows, completions = self._scored
            mask = out["completion_mask"]
            if "tool_mask" in out:
                mask = mask * out["tool_mask"]
            local = mask.sum(dim=1).long()
            lengths = self.accelerator.gather(local).tolist()
            g = self.num_generations if self.model.training else self.num_generations_eval
            names = self.reward_func_names
            bounds = self._bounds or [(0.0, 1.0)] * len(names)
            passes = self._passes(rows, completions, out["completion_ids"], mask, rewards, g)
            batch = batch_of(rewards, lengths, g, names, bounds, passes,
                             step=self.state.global_step, total_steps=self.state.max_steps)
            scores, metrics = advantages(self.method_name, batch, self.method_options)
            start = self.accelerator.process_index * len(local)
            mine = scores[start:start + len(local)]
            t = mask.shape[1]
            adv = torch.zeros(len(local), t, dtype=torch.float32)
            w = min(t, mine.shape[1])
            adv[:, :w] = mine[:, :w]
            out["advantages"] = adv.to(mask.device) * mask
            mode = "train" if self.model.training else "eval"
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    self._metrics[mode][f"method/{key}"].append(float(value))
            return out

        def _passes(self, rows, completions, completion_ids, mask, rewards, g) -> dict:
            """The method's passes on TRL's model (the policy that sampled, before its
            update), as the harness's trainer runs them."""
            if not self.method.passes:
                return {}
            from harness.replay import PolicyContext
            from methods.stats import within_group_signal

            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
            examples = [self.examples[r["example_id"]] for r in rows]
            model = self.accelerator.unwrap_model(self.model)
            n = len(rows)
            group = torch.arange(n) // g
            r = rewards.float().cpu()
            bounds = self._bounds or [(0.0, 1.0)] * r.shape[1]
            ctx = PolicyContext.of(model, self.processing_class, examples,
                                   completion_ids.cpu(), mask.cpu().long(),
                                   self.reward_func_names, temperature=self.temperature,
                                   batch_size=self.args.per_device_train_batch_size,
                                   rewards=r, texts=texts, reward_bounds=bounds,
                                   initial=self._initial, current=model)
            ctx.group = group
            ctx.signal = within_group_signal(r, group)
            ctx.state = self.__dict__.setdefault("_pass_state", {})
            was = model.training
            model.eval()
            try:
                with torch.no_grad():
                    return {p.name: p.run(ctx, self.method_options) for p in self.method.passes}
            finally:
                model.train(was)

    return MethodGRPOTrainer


class MethodGRPOTrainer(metaclass=_Lazy):
    """TRL's ``GRPOTrainer`` with a registered method's advantages (built on first use; see
    the module docstring and ``_make``)."""
