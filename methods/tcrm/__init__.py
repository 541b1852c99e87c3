"""TCRM (Nikulkov 2026, "Reward Models Are Secretly Value Functions: Temporally Coherent Reward
Modeling", arXiv 2604.22981): GDPO whose per-reward advantages go to the tokens that changed
the reward's expected outcome, as a value model learned from the verifiers' outcomes says.

A value model (``model.py``: a copy of the starting policy's body, one head per reward) is
trained on each step's rollouts before the step's credit is read (``online.py``), with TCRM's
objective (``losses.py``): Bradley-Terry on the final tokens of same-prompt pairs whose reward
differs, plus the lookahead (Monte Carlo) and smoothness (one-step TD) terms that make its
output at every token the conditional expectation of the final one. Token t's credit for
reward k is ``c_k(t) = v_k(t) - v_k(t-1)``; the allocation turns it into token weights with
mean 1 over a response, ``w_k = (1 - beta) + beta * x_k / mean_t x_k`` with ``x_k =
max(0, sign(A_k) c_k)`` (``aligned``: the tokens that moved the expected outcome the way the
advantage points) or ``|c_k|`` (``abs``), and ``S = whiten(sum_k w_k * contrib_k)`` as MRTPO
and P2T. It reads no verifier text. beta = 0 is GDPO.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.lazy import lazy

from methods.base import Pass, PassContext, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.mrtpo import kept_metrics, mrtpo_token_weights
from methods.registry import add
from methods.tcrm import online

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

PASS = "value"  # [N, K, T] per-token credit v_k(t) - v_k(t-1)
PROFILES = ("aligned", "abs")


@dataclass(frozen=True)
class TcrmOptions:
    tcrm_model: Optional[str] = option(
        None, "TCRM: HF folder of the value model: a saved TCRM model of this task's rewards "
              "(its heads kept) or a causal LM of the policy's tokenizer (its body, new heads); "
              "unset: a copy of the starting policy")
    tcrm_beta: float = option(0.5, "TCRM: allocation strength beta in w = (1-beta) + "
                                   "beta*x/mean(x); 0 is GDPO")
    tcrm_profile: str = option("aligned", "TCRM: a token's share, aligned (max(0, sign(A) * "
                                          "credit): the tokens that moved the expected outcome "
                                          "the advantage's way) | abs (|credit|)")
    tcrm_lookahead: float = option(0.01, "TCRM: coefficient of the lookahead (Monte Carlo) "
                                         "term (the paper's 0.01)")
    tcrm_smoothness: float = option(0.1, "TCRM: coefficient of the smoothness (one-step TD) "
                                         "term (the paper's 0.1)")
    tcrm_lr: float = option(1e-4, "TCRM: the value model's AdamW learning rate")
    tcrm_epochs: int = option(2, "TCRM: passes over the buffer per step before the credit is "
                                 "read (0: the value model as given, untrained)")
    tcrm_buffer: int = option(1, "TCRM: steps of rollouts the value model trains on (this "
                                 "one and the ones before)")
    tcrm_train_layers: int = option(2, "TCRM: top transformer blocks of the value model that "
                                       "train besides its heads (-1: all)")
    tcrm_save: Optional[str] = option(
        None, "TCRM: write the value model to this folder after each step (an HF folder that "
              "--tcrm-model and --p2t-reward-model read)", identity=False)

    def problems(self) -> list[str]:
        import os

        out = []
        if not 0.0 <= self.tcrm_beta <= 1.0:
            out.append(f"tcrm_beta is {self.tcrm_beta}, outside [0, 1]; use --tcrm-beta "
                       "within it")
        if self.tcrm_profile not in PROFILES:
            out.append(f"unknown tcrm_profile {self.tcrm_profile!r}; use one of "
                       f"{', '.join(PROFILES)} (--tcrm-profile)")
        if self.tcrm_lookahead < 0 or self.tcrm_smoothness < 0:
            out.append("tcrm_lookahead and tcrm_smoothness must be >= 0 (--tcrm-lookahead, "
                       "--tcrm-smoothness)")
        if not self.tcrm_lr > 0:
            out.append(f"tcrm_lr is {self.tcrm_lr}; use a value > 0 (--tcrm-lr)")
        if self.tcrm_epochs < 0 or self.tcrm_buffer < 1 or self.tcrm_train_layers < -1:
            out.append("tcrm_epochs must be >= 0, tcrm_buffer >= 1 and tcrm_train_layers "
                       ">= -1 (--tcrm-epochs, --tcrm-buffer, --tcrm-train-layers)")
        path = self.tcrm_model
        if path is not None and not os.path.isfile(os.path.join(path, "config.json")):
            out.append(f"--tcrm-model {path}: no config.json there; give an HF model folder "
                       "(save_pretrained), e.g. one written by --tcrm-save")
        if path is None and self.tcrm_epochs == 0:
            out.append("tcrm_epochs 0 with no --tcrm-model reads credit from untrained heads; "
                       "give a trained value model (--tcrm-model) or train (--tcrm-epochs)")
        if self.tcrm_save is not None:
            from common.paths import folder_problem

            problem = folder_problem(self.tcrm_save, "--tcrm-save")
            if problem:
                out.append(problem)
        return out

    def problems_with_rewards(self, rewards: tuple[str, ...]) -> list[str]:
        """A saved TCRM model's heads are its rewards': another task's cannot serve."""
        import json
        import os

        path = self.tcrm_model
        config = os.path.join(path, "config.json") if path else None
        if config is None or not os.path.isfile(config):
            return []  # problems() names a folder without one
        try:
            from methods.tcrm.model import REWARDS_KEY

            saved = json.loads(open(config).read()).get(REWARDS_KEY)
        except (ValueError, AttributeError) as exc:
            return [f"--tcrm-model {path}: config.json is not a JSON object ({exc})"]
        if saved is not None and list(saved) != list(rewards):
            return [f"--tcrm-model {path}: a TCRM model of the rewards {list(saved)}, this "
                    f"task's are {list(rewards)}; give one trained on this task's rewards "
                    "(--tcrm-save in a run of it), or a plain backbone"]
        return []


def _state(ctx: PassContext, options) -> online.ValueState:
    """The run's value model (built at the first step, restored after a resume)."""
    state = ctx.state.get(PASS)
    if state is None:
        state = online.ValueState(options.tcrm_model, tuple(ctx.reward_names),
                                  int(torch.initial_seed()) % (2 ** 31),
                                  options.tcrm_train_layers, options.tcrm_lr)
        ctx.state[PASS] = state
    if state.model is None and state.source is not None:
        from methods.tcrm.model import check_tokenizer

        check_tokenizer(state.source, ctx.tokenizer)
        state.ensure(None)
    elif state.model is None:
        state.ensure(ctx.model("initial"))
    return state


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def value_credit(ctx: PassContext, options) -> torch.Tensor:
    """[n, K, T]: train the value model on this step's rollouts (and the buffer's), then each
    token's change of each reward's expected outcome under it. Logged: the pairs' final- and
    middle-token accuracy before training on them (held out), the loss terms after. In float32
    whatever the run's ``--update-dtype``: the value model's training was checked in float32
    only (docs/results.md)."""
    import contextlib

    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            stack.enter_context(torch.autocast(device_type=device, enabled=False))
        return _value_credit(ctx, options)


def _value_credit(ctx: PassContext, options) -> torch.Tensor:
    import time

    t0 = time.perf_counter()
    state = _state(ctx, options)
    pad = ctx.tokenizer.pad_token_id
    data = online.Rollouts(online.render_prompts(ctx.tokenizer, ctx.examples),
                           ctx.response_ids, ctx.response_mask, ctx.rewards.float(), ctx.group)
    before = online.predict(state.model, data, ctx.batch_size, pad, state.frozen)
    held = online.pair_accuracy(before, data)
    metrics = {f"heldout_{k}": float(v) for k, v in held.items()}
    state.buffer = (state.buffer + [data])[-options.tcrm_buffer:]
    v = before
    if options.tcrm_epochs > 0:
        metrics.update(online.train(state, options.tcrm_epochs, ctx.batch_size,
                                    options.tcrm_lookahead, options.tcrm_smoothness, pad))
        v = online.predict(state.model, data, ctx.batch_size, pad, state.frozen)
    if options.tcrm_save and _rank() == 0:
        from methods.tcrm.model import save

        save(state.model, ctx.tokenizer, options.tcrm_save)
    metrics["time"] = time.perf_counter() - t0
    state.metrics = metrics
    return online.credit(v, ctx.response_mask)


def diagnose(ctx: PassContext, options, out: torch.Tensor) -> list[dict]:
    """This worker's value-model figures (one record)."""
    state = ctx.state.get(PASS)
    return [dict(getattr(state, "metrics", {}))] if state is not None else []


def summarise(records: list[dict]) -> dict:
    """Means over workers, logged as ``tcrm/<name>``."""
    keys = {k for r in records for k in r}
    return {f"tcrm/{k}": sum(r[k] for r in records if k in r) /
            sum(1 for r in records if k in r) for k in sorted(keys)}


def token_weights(credit: torch.Tensor, contrib: torch.Tensor, mask: torch.Tensor,
                  beta: float, profile: str) -> torch.Tensor:
    """TCRM's token weights.

    Args:
        credit: [N, K, T] ``v_k(t) - v_k(t-1)``.
        contrib: [N, K] each reward's contribution to the advantage (its sign: the
            direction the advantage pushes).
        mask: [N, T] valid response tokens.
    Returns: [N, K, T] ``(1 - beta) + beta * x / mean_t x`` (mean 1 over valid tokens, 0
        elsewhere) with ``x = max(0, sign(contrib) * credit)`` (aligned) or ``|credit|``
        (abs); a response whose ``x`` is 0 everywhere gets the uniform weights (GDPO's).
    """
    c = torch.nan_to_num(credit, nan=0.0)
    x = (torch.sign(contrib)[..., None] * c).clamp(min=0) if profile == "aligned" else c.abs()
    return mrtpo_token_weights(x, mask, beta)


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """``S[n,t] = sum_k w_k[n,t] * contrib[n,k]`` (before whitening); metrics: the share of
    each reward's advantage kept where GDPO puts it (``alloc/<reward>/kept``)."""
    if norm.contrib is None:
        raise ValueError("tcrm allocates each reward's advantage separately; compose it with "
                         "gdpo")
    credit = batch.pass_output(PASS, "tcrm")
    mask = batch.response_mask
    w = token_weights(credit, norm.contrib, mask, options.tcrm_beta, options.tcrm_profile)
    moved = (norm.contrib != 0) & (mask.sum(dim=-1) > 0)[:, None]
    return torch.einsum("nkt,nk->nt", w, norm.contrib), kept_metrics(w, mask, moved,
                                                                     batch.reward_names)


VALUE = Pass(PASS, "TCRM's value model trained on the step's rollouts and outcomes, then each "
                   "token's change of each reward's expected outcome",
             value_credit, diagnose=diagnose, summarise=summarise,
             models=lambda options: frozenset({"initial"}) if options.tcrm_model is None
             else frozenset(),
             reads_verifier_info=False)
ALLOCATIONS.add("tcrm", allocate)
add("tcrm", "GDPO whose per-reward advantages go to the tokens that changed the reward's "
    "expected outcome under a value model learned online from the verifiers' outcomes (TCRM); "
    "w = (1-beta) + beta x/mean(x), x = max(0, sign(A) (v(t) - v(t-1)))",
    "TCRM (Nikulkov 2026, arXiv 2604.22981): the objective; its use as per-reward credit is "
    "this harness's (docs/methods.md)", options=(TcrmOptions,), passes=(VALUE,),
    allocation="tcrm", reference="gdpo")
