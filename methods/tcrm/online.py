"""TCRM trained where the harness has the data: on each step's rollouts and their per-reward
outcomes (and a buffer of recent steps), before the step's credit is read from it.

:class:`ValueState` is what the pass keeps between steps (the harness checkpoints it with the
run, so a resumed run continues the same value model): the model, its optimizer, the buffer
and the number of updates. Pickled, it keeps only what training changed (the trained
parameters, the optimizer's state, the buffer); the frozen rest is rebuilt from its source.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from common.lazy import lazy

from methods.tcrm import losses
from methods.tcrm import model as vm

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass
class Rollouts:
    """One step's responses as the value model reads them."""

    prompts: list  # [n] token-id lists (each response's rendered prompt)
    response_ids: Any  # [n, T] long
    response_mask: Any  # [n, T]
    rewards: Any  # [n, K] float, NaN where absent
    group: Any  # [n] long
    # [n, W, H] the value model's frozen blocks' output on these rows (computed once: they do
    # not train), or None; not pickled (recomputed)
    states: Any = None

    def select(self, rows: Sequence[int]) -> "Rollouts":
        idx = torch.tensor(list(rows), dtype=torch.long)
        return Rollouts([self.prompts[i] for i in rows], self.response_ids[idx],
                        self.response_mask[idx], self.rewards[idx], self.group[idx],
                        None if self.states is None else self.states[idx])

    def prepare(self, model, frozen: int, chunk: int, pad_id: int) -> None:
        """Run the frozen blocks over every row once (in chunks of ``chunk`` rows)."""
        if not frozen or self.states is not None:
            return
        parts = []
        for s in range(0, len(self.prompts), chunk):
            rows = list(range(s, min(len(self.prompts), s + chunk)))
            sub = self.select(rows)
            parts.append(vm.trunk(model, frozen, vm.encode(
                sub.prompts, sub.response_ids, sub.response_mask, pad_id)).cpu())
        width = max(p.shape[1] for p in parts)
        self.states = torch.cat([torch.nn.functional.pad(p, (0, 0, 0, width - p.shape[1]))
                                 for p in parts])

    def __getstate__(self) -> dict:
        return {**self.__dict__, "states": None}

    def chunks(self, size: int) -> list[list[int]]:
        """Row lists of whole groups, about ``size`` rows each (a group larger than ``size``
        alone): a chunk's pairs are within it."""
        groups: dict[int, list[int]] = {}
        for i, g in enumerate(self.group.tolist()):
            groups.setdefault(g, []).append(i)
        out, cur = [], []
        for rows in groups.values():
            if cur and len(cur) + len(rows) > size:
                out.append(cur)
                cur = []
            cur = cur + rows
        return out + ([cur] if cur else [])


def render_prompts(tokenizer, examples: Sequence[Any]) -> list[list[int]]:
    """Each example's prompt as the policy read it (chat template, generation prompt)."""
    texts = [tokenizer.apply_chat_template(list(ex.messages), add_generation_prompt=True,
                                           tokenize=False) for ex in examples]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def objective(v: "torch.Tensor", mask1: "torch.Tensor", data: Rollouts, look: float,
              smooth: float) -> tuple["torch.Tensor", dict]:
    """Sum over rewards of TCRM's objective on one chunk (``v`` [m, K, T + 1] from
    :func:`methods.tcrm.model.values`, ``mask1`` [m, T + 1]): the Bradley-Terry loss (mean
    over pairs) + ``look`` x the lookahead and ``smooth`` x the smoothness term, each summed
    over a response's tokens and averaged over responses, as the paper writes them; rows whose
    reward k is absent do not train head k. Returns (loss, {bt, lookahead, smoothness} summed over rewards)."""
    total = v.sum() * 0.0
    parts = {"bt": 0.0, "lookahead": 0.0, "smoothness": 0.0}
    for k in range(v.shape[1]):
        present = (~torch.isnan(data.rewards[:, k])).float()
        if not bool(present.any()):
            continue
        bt = losses.bradley_terry(v[:, k], mask1,
                                  losses.preference_pairs(data.rewards[:, k], data.group))
        # the paper's terms sum over a response's tokens (a mean over the responses here):
        # the weighted per-token means times the kept tokens per response
        rows = present.sum()
        ahead = mask1.bool() & (torch.arange(mask1.shape[1])[None, :]
                                < losses.last_index(mask1)[:, None])
        pairs_next = mask1[:, :-1].bool() & mask1[:, 1:].bool()
        la = losses.lookahead(v[:, k], mask1, present) * (ahead.float().sum(1) * present
                                                          ).sum() / rows
        sm = losses.smoothness(v[:, k], mask1, present) * (pairs_next.float().sum(1) * present
                                                           ).sum() / rows
        total = total + bt + look * la + smooth * sm
        parts["bt"] += float(bt.detach())
        parts["lookahead"] += float(la.detach())
        parts["smoothness"] += float(sm.detach())
    return total, parts


def with_start(mask: "torch.Tensor") -> "torch.Tensor":
    """[m, T] response mask -> [m, T + 1] with the value after the prompt valid."""
    return torch.cat([torch.ones(mask.shape[0], 1, dtype=mask.dtype), mask], dim=1)


def pair_hits(v: "torch.Tensor", data: Rollouts, rewards: Sequence[str]
              ) -> dict[str, dict[str, list]]:
    """Per reward, one entry per preference pair (``v`` [m, K, T + 1] on ``data``'s rows):
    ``final`` 1 when the preferred response's final value is the larger (ties 1/2, else 0),
    ``middle`` the same at each response's middle token (position ``floor((L - 1) / 2)`` of its
    L tokens), ``prompt`` the pair's group."""
    lengths = data.response_mask.sum(dim=1).long()
    cols = {"final": lengths, "middle": (lengths - 1) // 2 + 1}  # column 0 is the prompt's
    out = {}
    for k, name in enumerate(rewards):
        hits: dict[str, list] = {"final": [], "middle": [], "prompt": []}
        for i, j in losses.preference_pairs(data.rewards[:, k], data.group):
            for key, at in cols.items():
                a, b = float(v[i, k, at[i]]), float(v[j, k, at[j]])
                hits[key].append(1.0 if a > b else 0.5 if a == b else 0.0)
            hits["prompt"].append(int(data.group[i]))
        out[name] = hits
    return out


def pair_accuracy(v: "torch.Tensor", data: Rollouts) -> dict:
    """:func:`pair_hits` pooled over every reward: ``pairs`` and, where there are any, the
    accuracies ``acc_final`` and ``acc_middle``."""
    hits = pair_hits(v, data, [str(k) for k in range(v.shape[1])]).values()
    n = sum(len(h["prompt"]) for h in hits)
    if not n:
        return {"pairs": 0}
    return {"pairs": n, **{f"acc_{key}": sum(sum(h[key]) for h in hits) / n
                           for key in ("final", "middle")}}


@dataclass
class ValueState:
    """The value model between steps (one per run and worker)."""

    source: Optional[str]  # --tcrm-model, or None: a copy of the starting policy
    rewards: tuple[str, ...]
    seed: int
    layers: int
    lr: float
    model: Any = None
    optimizer: Any = None
    buffer: list = field(default_factory=list)  # recent steps' Rollouts
    updates: int = 0
    _restored: Optional[dict] = None  # trained parameters and optimizer state to put back
    frozen: int = 0  # the body's first blocks that do not train (run once per rollout)

    def ensure(self, initial) -> None:
        """Build the model (from ``initial``, the starting policy, or the source folder) and
        its optimizer; after a restore, put the trained parameters and optimizer state back."""
        if self.model is not None:
            return
        self.model = vm.from_folder(self.source, self.rewards, self.seed) if self.source \
            else vm.from_policy(initial, self.rewards, self.seed)
        params = vm.train_layers(self.model, self.layers)
        self.frozen = vm.frozen_blocks(self.model, self.layers)
        self.optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)
        if self._restored is not None:
            named = dict(self.model.named_parameters())
            with torch.no_grad():
                for name, tensor in self._restored["params"].items():
                    named[name].copy_(tensor)
            self.optimizer.load_state_dict(self._restored["optimizer"])
            self._restored = None

    def __getstate__(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k not in ("model", "optimizer")}
        if self.model is not None:
            out["_restored"] = {
                "params": {n: p.detach().clone() for n, p in self.model.named_parameters()
                           if p.requires_grad},
                "optimizer": self.optimizer.state_dict()}
        return out

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.model = self.optimizer = None


def _average_gradients(params: Sequence) -> None:
    """Every worker trains on its own groups: average the gradients so the copies stay equal."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    for p in params:
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        dist.all_reduce(g)
        p.grad = g / dist.get_world_size()


def train(state: ValueState, epochs: int, chunk: int, look: float, smooth: float,
          pad_id: int, clip: float = 1.0) -> dict:
    """``epochs`` passes over the buffer in chunks of whole groups (order drawn from a
    generator seeded by the seed and the update count), one optimizer step per chunk.
    Returns the mean of each loss term over the last epoch's chunks."""
    model, opt = state.model, state.optimizer
    params = [p for p in model.parameters() if p.requires_grad]
    for data in state.buffer:
        data.prepare(model, state.frozen, chunk, pad_id)
    units = [(s, rows) for s, data in enumerate(state.buffer) for rows in data.chunks(chunk)]
    means: dict = {}
    for epoch in range(epochs):
        g = torch.Generator().manual_seed(state.seed * 1_000_003 + state.updates)
        sums = {"loss": 0.0, "bt": 0.0, "lookahead": 0.0, "smoothness": 0.0}
        for u in torch.randperm(len(units), generator=g).tolist():
            s, rows = units[u]
            data = state.buffer[s].select(rows)
            with torch.enable_grad():
                v = vm.values(model, data.prompts, data.response_ids, data.response_mask,
                              pad_id, state.frozen, data.states)
                loss, parts = objective(v, with_start(data.response_mask), data, look, smooth)
                opt.zero_grad(set_to_none=True)
                loss.backward()
            _average_gradients(params)
            torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            state.updates += 1
            sums["loss"] += float(loss.detach())
            for key, value in parts.items():
                sums[key] += value
        if epoch == epochs - 1 and units:
            means = {k: v / len(units) for k, v in sums.items()}
    return means


def predict(model, data: Rollouts, chunk: int, pad_id: int, frozen: int = 0
            ) -> "torch.Tensor":
    """[n, K, T + 1] values without gradient, in chunks of ``chunk`` rows (``frozen``: the
    first blocks' output is computed once and kept on ``data``)."""
    parts = []
    n = len(data.prompts)
    data.prepare(model, frozen, chunk, pad_id)
    with torch.no_grad():
        for s in range(0, n, chunk):
            rows = list(range(s, min(n, s + chunk)))
            sub = data.select(rows)
            parts.append(vm.values(model, sub.prompts, sub.response_ids, sub.response_mask,
                                   pad_id, frozen, sub.states))
    return torch.cat(parts) if parts else torch.zeros(0, len(data.rewards[0]), 1)


def credit(v: "torch.Tensor", mask: "torch.Tensor") -> "torch.Tensor":
    """[n, K, T] each token's change of each reward's expected outcome (``v`` [n, K, T + 1])."""
    n, k, _ = v.shape
    flat = v.reshape(n * k, -1)
    m = mask.repeat_interleave(k, dim=0)
    return losses.token_credit(flat[:, 1:], m, flat[:, 0]).reshape(n, k, -1)
