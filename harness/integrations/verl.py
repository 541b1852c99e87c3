"""The sequence-level registered methods as verl advantage estimators (verl 0.9.1, its own
environment: ``bash scripts/setup.sh --verl``; docs/integrations.md).

verl's estimator interface (``verl/trainer/ppo/core_algos.py``) is a function registered with
``register_adv_est(name)`` and called as ``fn(token_level_rewards [B, T], response_mask [B, T],
index=uid [B], config=AlgoConfig, **extra) -> (advantages [B, T], returns [B, T])``. The
per-reward scores are what a reward function returns beside its ``score`` (verl's
``reward_extra_info``), which the trainer copies into ``data.non_tensor_batch[key]``: one
array of B floats per key. :func:`register` makes an estimator of a method that reads the
method's rewards from there, groups rows by ``uid`` and computes the harness's own advantage
(``methods.compute``), so the numbers are the harness's.

What verl 0.9.1 does not pass on (its source, not a guess):
* its ``compute_advantage`` (``verl/trainer/ppo/ray_trainer.py``) hands ``non_tensor_batch``
  only to the estimator named ``gdpo``; :func:`compute_advantage` here is the same function
  with that extended to the estimators registered by :func:`register`;
* its default v1 trainer (``trainer.use_v1``) selects fixed fields from its TransferQueue in
  ``_compute_advantage`` (``uid``, ``response_mask``, ``rm_scores``, log-probs, ``values``):
  the per-reward scores reach no estimator there, verl's own ``gdpo`` included;
* an estimator runs in the driver, without the policy (it lives in the actor workers) and
  without the prompts' text, so the token-level methods' passes (replays, gradients, evidence)
  have nothing to run on: :func:`register` refuses a method with passes or loss terms.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import torch

import methods
from methods import RolloutBatch

PREFIX = "harness:"  # estimator names: harness:<method>, so none shadows one of verl's


def _verl():
    try:
        from verl.trainer.ppo import core_algos
    except ImportError as e:
        raise ImportError("the verl integration needs verl 0.9.1 in its own environment: "
                          "bash scripts/setup.sh --verl, then .venv-verl/bin/python") from e
    return core_algos


def group_ids(index: Sequence[Any]) -> torch.Tensor:
    """[B] long group of each row: rows with the same verl ``uid`` answer the same prompt."""
    seen: dict = {}
    return torch.tensor([seen.setdefault(u, len(seen)) for u in index], dtype=torch.long)


def reward_matrix(non_tensor_batch: Mapping[str, Any], keys: Sequence[str],
                  rows: int) -> torch.Tensor:
    """[B, K] float rewards from verl's per-reward arrays (None or NaN: the reward is absent
    for that row)."""
    missing = [k for k in keys if k not in non_tensor_batch]
    if missing:
        raise KeyError(f"per-reward scores {missing} are not in the batch's non_tensor_batch "
                       f"(it has {sorted(non_tensor_batch)}): the reward function must return "
                       "them beside 'score' (verl's reward_extra_info)")
    cols = []
    for k in keys:
        values = list(non_tensor_batch[k])
        if len(values) != rows:
            raise ValueError(f"reward {k!r} has {len(values)} rows, the batch {rows}")
        cols.append([float("nan") if v is None else float(v) for v in values])
    return torch.tensor(cols, dtype=torch.float32).T.reshape(rows, len(keys))


def advantages(method: str, rewards: torch.Tensor, response_mask: torch.Tensor,
               index: Sequence[Any], reward_names: Sequence[str],
               bounds: Optional[Sequence[tuple[float, float]]] = None,
               options=None) -> torch.Tensor:
    """``[B, T]`` advantages of ``method`` on verl's rows: ``rewards`` [B, K], the response
    mask [B, T] and ``index`` (the uid of each row); zero off the mask."""
    mask = response_mask.long().cpu()
    batch = RolloutBatch(rewards=rewards.float().cpu(), reward_names=tuple(reward_names),
                         reward_bounds=tuple(tuple(b) for b in
                                             (bounds or [(0.0, 1.0)] * len(reward_names))),
                         group=group_ids(index), response_mask=mask)
    out = methods.compute(method, batch, options if options is not None else methods.options())
    scores = torch.zeros(mask.shape, dtype=torch.float32)
    w = min(mask.shape[1], out.scores.shape[1])
    scores[:, :w] = out.scores[:, :w].float()
    return (scores * mask).to(response_mask.device)


def estimator(method: str, reward_keys: Sequence[str], options=None,
              reward_bounds: Optional[Sequence[tuple[float, float]]] = None) -> Callable:
    """The verl estimator function of ``method`` (what :func:`register` registers)."""
    spec = methods.get(method)  # an unknown name fails here, before verl starts
    opts = options if options is not None else methods.options()
    problems = spec.problems(opts)
    if problems:
        raise ValueError(f"method {method!r}: " + "; ".join(problems))
    if spec.passes or spec.loss_terms or not spec.pg_term:
        extra = ", ".join(spec.needs) or "its loss"
        raise ValueError(
            f"method {method!r} needs {extra} on the policy, which a verl estimator cannot "
            "run: verl calls it in the driver with rewards, masks and uids only (no model, no "
            "prompt text). Use a sequence-level method here, or train it with TRL "
            "(harness.integrations.trl) or the harness")
    if reward_bounds is not None and len(reward_bounds) != len(reward_keys):
        raise ValueError(f"{len(reward_bounds)} reward bounds for {len(reward_keys)} rewards")
    keys = tuple(reward_keys)

    def fn(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index=None,
           config=None, non_tensor_batch: Optional[Mapping[str, Any]] = None, **_):
        if non_tensor_batch is None:
            raise ValueError(
                f"estimator {PREFIX}{method} got no per-reward scores: verl 0.9.1's "
                "compute_advantage passes non_tensor_batch to one of its own estimators only. Call "
                "harness.integrations.verl.compute_advantage (the same function, passing it) "
                "in its place (docs/integrations.md)")
        if index is None:
            raise ValueError(f"estimator {PREFIX}{method} needs the batch's 'uid' (the prompt "
                             "groups) in non_tensor_batch")
        if config is not None and not config.get("norm_adv_by_std_in_grpo", True):
            raise ValueError("norm_adv_by_std_in_grpo=False does not apply to a harness "
                             "method: set its own options (e.g. methods.options(whiten="
                             "'none')) instead")
        weights = config.get("gdpo_reward_weights", None) if config is not None else None
        if weights is not None and any(float(w) != 1.0 for w in weights):
            raise ValueError(f"algorithm.gdpo_reward_weights={list(weights)} weights one of "
                             f"verl's own estimators, which {PREFIX}{method} replaces: leave it "
                             "unset, or "
                             "register a method that weights the rewards (a reward weighting, "
                             "or a plugin: docs/extending.md)")
        rows = response_mask.shape[0]
        r = reward_matrix(non_tensor_batch, keys, rows)
        adv = advantages(method, r, response_mask, index, keys, reward_bounds, opts)
        return adv, adv

    fn.__name__ = f"harness_{method}"
    return fn


def register(method: str, reward_keys: Sequence[str], *, options=None,
             reward_bounds: Optional[Sequence[tuple[float, float]]] = None) -> str:
    """Register ``method`` (a name, a composition ``a+b`` or a plugin's method) as a verl
    advantage estimator reading ``reward_keys`` from ``non_tensor_batch``; returns its name,
    ``harness:<method>``, for ``algorithm.adv_estimator``. Registering the same name again
    replaces the estimator (verl's own decorator refuses a second registration)."""
    core_algos = _verl()
    fn = estimator(method, reward_keys, options, reward_bounds)
    name = PREFIX + method
    core_algos.ADV_ESTIMATOR_REGISTRY.pop(name, None)
    core_algos.register_adv_est(name)(fn)
    return name


_VERL_COMPUTE: list = []  # verl's own compute_advantage, once route_compute_advantage ran


def route_compute_advantage() -> None:
    """Make verl's legacy trainer (``ray_trainer.fit``) call :func:`compute_advantage` in this
    process (each process its own: verl trains inside its TaskRunner actor, not the driver)."""
    from verl.trainer.ppo import ray_trainer

    if not _VERL_COMPUTE:
        _VERL_COMPUTE.append(ray_trainer.compute_advantage)
        ray_trainer.compute_advantage = compute_advantage


def task_runner(method: str, reward_keys: Sequence[str], *, options=None,
                reward_bounds: Optional[Sequence[tuple[float, float]]] = None):
    """verl's legacy ``TaskRunner`` Ray actor (``trainer.use_v1=false``) that, in its own
    process and before it trains, registers ``method`` (:func:`register`) and routes the
    trainer's ``compute_advantage`` here: verl's training loop runs in that actor, so a
    registration made on the driver is absent there. ``main_ppo.run_ppo(config,
    task_runner_class=task_runner("saw", keys))`` with ``algorithm.adv_estimator=harness:saw``."""
    import ray
    from verl.trainer.main_ppo_v0 import TaskRunner

    estimator(method, reward_keys, options, reward_bounds)  # refused here, before verl starts

    class HarnessTaskRunner(TaskRunner.__ray_actor_class__):
        def prepare(self) -> str:
            name = register(method, reward_keys, options=options, reward_bounds=reward_bounds)
            route_compute_advantage()
            return name

        def run(self, config):
            self.prepare()
            return super().run(config)

    return ray.remote(HarnessTaskRunner)


def compute_advantage(data, adv_estimator, gamma: float = 1.0, lam: float = 1.0,
                      num_repeat: int = 1, norm_adv_by_std_in_grpo: bool = True, config=None):
    """verl's ``compute_advantage`` (``ray_trainer.py``; same arguments, same result) that also
    hands an estimator registered by :func:`register` the batch's per-reward scores; any other
    estimator goes to verl's own function unchanged."""
    from verl.trainer.ppo import ray_trainer

    name = str(getattr(adv_estimator, "value", adv_estimator))
    if not name.startswith(PREFIX):
        verl_own = _VERL_COMPUTE[0] if _VERL_COMPUTE else ray_trainer.compute_advantage
        return verl_own(data, adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
                        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
    if "response_mask" not in data.batch.keys():
        data.batch["response_mask"] = ray_trainer.compute_response_mask(data)
    if not norm_adv_by_std_in_grpo:
        raise ValueError("norm_adv_by_std_in_grpo=False does not apply to a harness method: "
                         "set its own options (e.g. methods.options(whiten='none')) instead")
    fn = _verl().get_adv_estimator_fn(name)
    adv, returns = fn(token_level_rewards=data.batch["token_level_rewards"],
                      response_mask=data.batch["response_mask"],
                      index=data.non_tensor_batch.get("uid"), config=config,
                      non_tensor_batch=data.non_tensor_batch)
    data.batch["advantages"] = adv
    data.batch["returns"] = returns
    return data
