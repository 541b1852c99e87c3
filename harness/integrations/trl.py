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

TRL's own normalisation is the method's now: ``scale_rewards``, ``multi_objective_aggregation``
and ``reward_weights`` set to anything but their defaults are refused at construction (each
names the method's way to the same end), as are reward functions named otherwise than the
rewards whose verifier information the method replays. The method's ``conventions`` default to
TRL's (``conventions=``). ``loss_type``, the clipping, tool masks (``tools=``, an environment's
``env_mask``), ``pad_to_multiple_of``, ``mask_truncated_completions`` and ``peft_config`` stay
TRL's: the method's credit lands on the tokens TRL trains (a tool result's tokens get none, the
model's tokens after it keep theirs) and its passes replay the completion as the model saw it,
tool results included. Evaluation batches (``eval_strategy``) keep TRL's own advantages: they
train nothing, and a pass there would (TCRM's value model). TRL's completions log
(``log_completions``) shows the method's advantage of each completion (its mean over the
tokens trained), ``frac_reward_zero_std`` the share of completions it gave none. The passes
render prompts as TRL does (``tools``, ``chat_template_kwargs``), and their state (TCRM's value
model) is saved with TRL's checkpoints and restored on resume. Under several processes (a
multi-GPU run) each runs the method's passes on its own rows, whole groups
(``per_device_train_batch_size`` a multiple of ``num_generations``), and their outputs are
gathered in TRL's row order.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch

import methods
from harness.integrations.trl_checks import (initial_copy_refused, trl_options_refused,
                                             unmatched_rewards)
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


def batch_of(rewards: torch.Tensor, mask, group_size: int,
             reward_names: Sequence[str], bounds: Sequence[tuple[float, float]],
             passes: Optional[dict] = None, step: int = 0, total_steps: int = 1) -> RolloutBatch:
    """The harness's batch of TRL's scores: rows in TRL's order, ``group_size`` consecutive
    rows per prompt (TRL's ``RepeatSampler``); ``mask``: [N, T] the tokens TRL trains (its
    completion mask times its tool mask: a tool result is a hole), or N lengths (a prefix of
    each row); ``step`` of ``total_steps`` for the methods' schedules (CoRT's warm-up)."""
    n = rewards.shape[0]
    if n % group_size:
        raise ValueError(f"{n} completions are not whole groups of {group_size}")
    if isinstance(mask, torch.Tensor):
        mask = mask.long().cpu()
    else:
        width = max(1, max(mask))
        mask = (torch.arange(width)[None, :] < torch.tensor(list(mask))[:, None]).long()
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


class RenderedAsTRL:
    """The tokenizer as TRL renders its prompts: ``apply_chat_template`` with TRL's ``tools``
    and ``chat_template_kwargs`` (a call's own arguments win), everything else the tokenizer's
    own. The passes replay each completion after the context the model read."""

    def __init__(self, tokenizer, **template):
        self._tokenizer, self._template = tokenizer, template

    def apply_chat_template(self, conversation, **kwargs):
        return self._tokenizer.apply_chat_template(conversation, **{**self._template, **kwargs})

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


STATE_FILE = "method-pass-state-rank{}.pt"  # in each of TRL's checkpoint folders


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
        passes), ``reward_bounds`` ([(lo, hi)] per reward function; default (0, 1)),
        ``conventions`` (the method's epsilons and default whitening; default TRL's, and a
        method that gives each token its own advantage then whitens over tokens unless
        ``method_options`` says otherwise).
        """

        def __init__(self, *args, method: str, method_options=None,
                     examples: Optional[Mapping[str, Any]] = None,
                     reward_bounds: Optional[Sequence[tuple[float, float]]] = None,
                     conventions: str = "trl", **kwargs):
            from dataclasses import replace

            from methods.stats import whitening_problem

            self.method = methods.get(method)  # unknown names fail before the model loads
            self.method_name = method
            # TRL's epsilons and default whitening unless asked otherwise: inside TRL a user
            # compares the method with TRL's own GRPO and GDPO
            opts = method_options if method_options is not None else methods.options()
            whiten = opts.whiten
            if whiten is None and whitening_problem(self.method.parts.allocation, "sequence"):
                # TRL's default whitening is per response; a method that gives each token
                # its own advantage whitens over tokens (as under verl's conventions)
                whiten = "token"
            self.method_options = replace(opts, conventions=conventions, whiten=whiten)
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
            refused = trl_options_refused(self.args, method) or unmatched_rewards(
                self.method, self.method_options, self.reward_func_names,
                self.examples.values())
            if refused:
                raise ValueError(refused)
            g, local = self.num_generations, self.args.per_device_train_batch_size
            if self.method.passes and self.accelerator.num_processes > 1 and local % g:
                # each process runs the passes on its own rows, which must be whole groups
                raise ValueError(f"method {method!r} runs passes over whole groups, and under "
                                 f"{self.accelerator.num_processes} processes a group of "
                                 f"num_generations={g} would span two of them: make "
                                 f"per_device_train_batch_size ({local}) a multiple of {g}")
            # the policy before training, for passes that read it (a copy, never trained)
            self._initial = None
            plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
            refused = initial_copy_refused(method, self.method, self.method_options,
                                           getattr(plugin, "zero_stage", 0) or 0)
            if refused:
                raise ValueError(refused)
            if "initial" in self.method.models(self.method_options):
                import copy

                self._initial = copy.deepcopy(self.accelerator.unwrap_model(self.model)).eval()

        def _save_checkpoint(self, model, trial):
            """TRL's checkpoint, and beside it this process's pass state (TCRM's value model,
            its optimizer and buffer), which the next step reads."""
            super()._save_checkpoint(model, trial)
            state = self.__dict__.get("_pass_state")
            if state:
                import os

                from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

                folder = os.path.join(self._get_output_dir(trial=trial),
                                      f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
                os.makedirs(folder, exist_ok=True)
                torch.save(state, os.path.join(folder, STATE_FILE.format(
                    self.accelerator.process_index)))

        def _load_optimizer_and_scheduler(self, checkpoint):
            """TRL's resume, and this process's pass state where the checkpoint has it."""
            super()._load_optimizer_and_scheduler(checkpoint)
            if checkpoint is None:
                return
            import os

            path = os.path.join(checkpoint, STATE_FILE.format(self.accelerator.process_index))
            if os.path.isfile(path):
                self.__dict__["_pass_state"] = torch.load(path, weights_only=False)

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions,
                                                 completion_ids_list)
            self._scored = (rewards, inputs, completions)
            return rewards

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if not self.model.training:
                return out  # an evaluation batch: TRL's advantages, for its loss alone
            rewards, rows, completions = self._scored
            seen = out["completion_mask"]  # what the model read: its tokens and tool results
            trained = seen * out["tool_mask"] if "tool_mask" in out else seen
            # every process's rows at one width (each pads its own: pad_to_multiple_of, its
            # longest completion), in TRL's order
            every = self.accelerator.gather(self.accelerator.pad_across_processes(
                trained, dim=1)).cpu()
            g = self.num_generations
            names = self.reward_func_names
            bounds = self._bounds or [(0.0, 1.0)] * len(names)
            n_local, t = trained.shape
            start = self.accelerator.process_index * n_local
            mine = rewards[start:start + n_local].float().cpu()  # this process's rows' scores
            examples = []  # what the passes replay, for a method that has them
            if self.method.passes:
                examples = [self.examples[r["example_id"]] for r in rows]
                refused = unmatched_rewards(self.method, self.method_options, names, examples,
                                            mine)
                if refused:
                    raise ValueError(refused)
            passes = self._gathered(self._passes(examples, completions, out["completion_ids"],
                                                 seen, mine, g))
            batch = batch_of(rewards, every, g, names, bounds, passes,
                             step=self.state.global_step, total_steps=self.state.max_steps)
            scores, metrics = advantages(self.method_name, batch, self.method_options)
            own = scores[start:start + n_local]
            adv = torch.zeros(n_local, t, dtype=torch.float32)
            w = min(t, own.shape[1])
            adv[:, :w] = own[:, :w]
            out["advantages"] = adv.to(trained.device) * trained
            # TRL's completions log: the method's advantage of each completion (its mean
            # over the tokens trained), not TRL's own that was computed and replaced
            credited = scores * every
            per_row = credited.sum(dim=1) / every.sum(dim=1).clamp(min=1)
            logged = self._logs["advantages"]  # a deque TRL appended this batch's rows to
            tail = per_row.tolist()[-len(logged):] if len(logged) else []
            for i, value in enumerate(tail):
                logged[len(logged) - len(tail) + i] = value
            # and its share of completions without signal: no advantage on any token trained
            zero = self._metrics["train"]["frac_reward_zero_std"]
            if zero:
                zero[-1] = float((credited.abs().sum(dim=1) == 0).float().mean())
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    self._metrics["train"][f"method/{key}"].append(float(value))
            return out

        def _gathered(self, passes: dict) -> dict:
            """Every process's pass outputs ([n_local, C, T_local] each) as one batch's, in
            TRL's row order, padded to one width."""
            if self.accelerator.num_processes == 1:
                return passes
            device = self.accelerator.device
            return {name: self.accelerator.gather(self.accelerator.pad_across_processes(
                        value.to(device), dim=value.dim() - 1)).cpu()
                    for name, value in passes.items()}

        def _passes(self, examples, completions, completion_ids, seen, rewards, g) -> dict:
            """The method's passes on TRL's model (the policy that sampled, before its
            update), as the harness's trainer runs them: each completion replayed as the
            model read it (``seen``: tool results included); the method then spreads its
            credit over the tokens ``trained`` alone (the batch's mask). ``examples`` (the
            Example each row answers), ``rewards`` [n, K]: this process's (whole groups of
            ``g``)."""
            if not self.method.passes:
                return {}
            from harness.replay import PolicyContext
            from methods.stats import within_group_signal

            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
            model = self.accelerator.unwrap_model(self.model)
            n = len(examples)
            group = torch.arange(n) // g
            r = rewards.float().cpu()
            bounds = self._bounds or [(0.0, 1.0)] * r.shape[1]
            tokenizer = RenderedAsTRL(self.processing_class, tools=self.tools or None,
                                      **self.chat_template_kwargs)
            ctx = PolicyContext.of(model, tokenizer, examples,
                                   completion_ids.cpu(), seen.cpu().long(),
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
                    out = {p.name: p.run(ctx, self.method_options) for p in self.method.passes}
            finally:
                model.train(was)
            return out

    return MethodGRPOTrainer


class MethodGRPOTrainer(metaclass=_Lazy):
    """TRL's ``GRPOTrainer`` with a registered method's advantages (built on first use; see
    the module docstring and ``_make``)."""
