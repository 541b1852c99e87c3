"""The ``lean`` engine: sampling on the CPU at the machine's limit, for Llama-style models.

``generate`` in transformers spends most of a CPU decode step outside the arithmetic: its
dynamic cache is re-concatenated every step, grouped-query attention copies the cache to every
head, and the weights go through generic matmul kernels. This engine runs the same network
(the plain HF copy's own modules give the rotary embedding; the formulas are the HF modelling
files' for Llama, Mistral, Qwen2 and Qwen3) with

- a static key/value cache, written in place, attended over its filled part only;
- grouped-query attention by broadcasting (no copy of the cache per head);
- q/k/v and gate/up fused into one matmul each, their weights in the rollout dtype and, in
  bf16, pre-packed once per weight sync for oneDNN's small-batch kernels;
- each prompt computed once for its n samples (shared prefill).

The policy's own log-probs (fp32, the training engine's) still score every response: this
engine reports the log-prob it sampled each token with, and the trainer compares the two on the
tokens it forwards (``rollout/logprob_gap``) and stops past ``--rollout-logprob-tolerance``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from harness.autovalues import onednn_bf16
from harness.console.progress import stage
from harness.rollouts.base import (Rollout, decode_responses, encode_prompts, eos_token_ids,
                                   greedy_in_batches, left_pad)
from harness.rollouts.hf import sync_plain_copy
from tasks.base import Example

# model types whose decoder layer is: RMSNorm -> (q, k, v)[+bias][+per-head RMSNorm on q, k]
# -> rotary -> attention -> o -> residual -> RMSNorm -> down(silu(gate) * up) -> residual
SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")


def unsupported(config) -> list[str]:
    """Why the lean engine cannot run a model with this HF config ([] if it can)."""
    why = []
    kind = getattr(config, "model_type", "?")
    if kind not in SUPPORTED:
        why.append(f"model type {kind!r} (supported: {', '.join(SUPPORTED)})")
    if getattr(config, "hidden_act", "silu") != "silu":
        why.append(f"activation {config.hidden_act!r} (supported: silu)")
    layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
    sliding = getattr(config, "sliding_window", None) and (
        getattr(config, "use_sliding_window", kind == "mistral")
        or "sliding_attention" in layer_types)
    if sliding or layer_types != {"full_attention"}:
        why.append("sliding-window attention")
    return why


class Linear:
    """``y = x W^T + b`` with W held in ``dtype``; in bf16 with oneDNN, W pre-packed for
    ``rows``-row inputs (the packed layout is a copy: ``pack`` again after W changes)."""

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor], dtype: torch.dtype,
                 packed: bool, rows: int) -> None:
        self.weight = weight.detach().to(dtype).contiguous()
        self.bias = None if bias is None else bias.detach().to(dtype).contiguous()
        self.packed = packed and dtype == torch.bfloat16
        if self.packed:
            self.weight = torch.ops.mkldnn._reorder_linear_weight(self.weight, rows)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """[..., D] fp32 -> [..., D] fp32, HF's RMSNorm (normalised in fp32, then scaled)."""
    return F.rms_norm(x, weight.shape, weight, eps)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """[N, H, S, d] rotary embedding with [N, 1, S, d] cos/sin (HF's rotate_half layout)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


@dataclass
class Layer:
    qkv: Linear
    o: Linear
    gate_up: Linear
    down: Linear
    norm_in: torch.Tensor  # [D] fp32
    norm_post: torch.Tensor  # [D] fp32
    q_norm: Optional[torch.Tensor]  # [d] fp32 (Qwen3) or None
    k_norm: Optional[torch.Tensor]


class LeanDecoder:
    """The network's forward for sampling: ``prefill`` a block of prompts, then ``step`` one
    token per row, over a static cache. Weights are read from ``model`` (a plain HF causal LM)
    by ``load``; call it again after the model's weights change."""

    def __init__(self, model, dtype: torch.dtype = torch.bfloat16, rows_hint: int = 8) -> None:
        why = unsupported(model.config)
        if why:
            raise ValueError("the lean rollout engine cannot run this model: "
                             + "; ".join(why) + ". Use --engine hf.")
        c = model.config
        self.model = model
        self.dtype = dtype
        self.rows_hint = rows_hint
        self.packed = dtype == torch.bfloat16 and onednn_bf16()
        self.heads = c.num_attention_heads
        self.kv_heads = getattr(c, "num_key_value_heads", None) or self.heads
        attn = model.model.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.scaling = attn.scaling
        self.eps = c.rms_norm_eps
        self.rotary = model.model.rotary_emb
        self.rope_table = (torch.empty(0, self.head_dim), torch.empty(0, self.head_dim))
        self.load()
        # the cache: each prompt's keys/values once ([U, kv, P, d] per layer, left-padded),
        # each row's generated ones ([N, kv, capacity, d]); filled by prefill and step
        self.k_prompt: list[torch.Tensor] = []
        self.v_prompt: list[torch.Tensor] = []
        self.k_gen: list[torch.Tensor] = []
        self.v_gen: list[torch.Tensor] = []
        self.length = 0  # generated columns filled

    @torch.no_grad()
    def load(self) -> None:
        """(Re)build the fused, cast and packed weights from the model's parameters."""
        m, dt, pk, rows = self.model.model, self.dtype, self.packed, self.rows_hint

        def cat_bias(*mods):
            bs = [x.bias for x in mods]
            if all(b is None for b in bs):
                return None
            return torch.cat([b if b is not None else torch.zeros(x.out_features)
                              for b, x in zip(bs, mods)])

        self.layers = []
        for layer in m.layers:
            a, f = layer.self_attn, layer.mlp
            # the attention's 1/sqrt(d) is folded into the queries (rotation is linear): into
            # q_proj, or into q_norm's weight where that comes after it (Qwen3)
            q_scale = 1.0 if hasattr(a, "q_norm") else self.scaling
            bias = cat_bias(a.q_proj, a.k_proj, a.v_proj)
            if bias is not None:
                bias = torch.cat([bias[:a.q_proj.out_features] * q_scale,
                                  bias[a.q_proj.out_features:]])
            self.layers.append(Layer(
                qkv=Linear(torch.cat([a.q_proj.weight * q_scale, a.k_proj.weight,
                                      a.v_proj.weight]), bias, dt, pk, rows),
                o=Linear(a.o_proj.weight, a.o_proj.bias, dt, pk, rows),
                gate_up=Linear(torch.cat([f.gate_proj.weight, f.up_proj.weight]),
                               cat_bias(f.gate_proj, f.up_proj), dt, pk, rows),
                down=Linear(f.down_proj.weight, f.down_proj.bias, dt, pk, rows),
                norm_in=layer.input_layernorm.weight.detach().float(),
                norm_post=layer.post_attention_layernorm.weight.detach().float(),
                q_norm=(a.q_norm.weight.detach().float() * self.scaling
                        if hasattr(a, "q_norm") else None),
                k_norm=a.k_norm.weight.detach().float() if hasattr(a, "k_norm") else None))
        self.norm = m.norm.weight.detach().float()
        self.embed = m.embed_tokens.weight  # read per token: no copy
        head = self.model.get_output_embeddings()
        self.lm_head = Linear(head.weight, head.bias, dt, pk, rows)

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, S] positions -> [N, 1, S, d] fp32 cos and sin, from a table of the model's own
        rotary embedding (its scaling included), grown by doubling when a position passes it."""
        need = int(positions.max()) + 1
        if need > self.rope_table[0].shape[0]:
            size = max(need, 2 * self.rope_table[0].shape[0], 512)
            cos, sin = self.rotary(torch.zeros(1, dtype=torch.float32), torch.arange(size)[None])
            self.rope_table = (cos[0].float(), sin[0].float())
        return self.rope_table[0][positions][:, None], self.rope_table[1][positions][:, None]

    def _layers(self, x: torch.Tensor, positions: torch.Tensor, attend: Callable) -> torch.Tensor:
        """[N, S, D] fp32 hidden states at [N, S] positions -> final-normed [N, S, D];
        ``attend(i, q, k, v)`` stores layer i's keys/values and returns the attention."""
        n, s, _ = x.shape
        cos, sin = self._rope(positions)
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        for i, layer in enumerate(self.layers):
            y = layer.qkv(rms_norm(x, layer.norm_in, self.eps).to(self.dtype)).float()
            qk, v = y.split([(h + kv) * d, kv * d], dim=-1)
            qk = qk.view(n, s, h + kv, d)
            if layer.q_norm is not None:
                qk = torch.cat([rms_norm(qk[:, :, :h], layer.q_norm, self.eps),
                                rms_norm(qk[:, :, h:], layer.k_norm, self.eps)], dim=2)
            q, k = rotate(qk.transpose(1, 2), cos, sin).split([h, kv], dim=1)  # one rotation
            v = v.view(n, s, kv, d).transpose(1, 2)
            out = attend(i, q, k, v)  # [N, S, H*d]
            x = x + layer.o(out.to(self.dtype)).float()
            gu = layer.gate_up(rms_norm(x, layer.norm_post, self.eps).to(self.dtype))
            gate, up = gu.chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up).float()
        return rms_norm(x, self.norm, self.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[N, D] final hidden states -> [N, V] fp32 logits."""
        return self.lm_head(hidden.to(self.dtype)).float()

    @torch.no_grad()
    def prefill(self, prompts: Sequence[Sequence[int]], repeat: int, capacity: int
                ) -> torch.Tensor:
        """U prompts -> [U * repeat, V] next-token logits. Each prompt is computed once, alone
        (no padding, causal attention); the cache keeps it once, left-padded to the longest
        (P columns), for its ``repeat`` rows (u*repeat .. u*repeat+repeat-1), and has room for
        ``capacity`` generated tokens per row."""
        u, p = len(prompts), max(len(x) for x in prompts)
        kv, d = self.kv_heads, self.head_dim
        self.repeat = repeat
        self.k_prompt = [torch.zeros(u, kv, p, d) for _ in self.layers]
        self.v_prompt = [torch.zeros(u, kv, p, d) for _ in self.layers]
        self.k_gen = [torch.empty(u * repeat, kv, capacity, d) for _ in self.layers]
        self.v_gen = [torch.empty(u * repeat, kv, capacity, d) for _ in self.layers]
        self.length = 0
        bias = torch.full((u, p), float("-inf"))
        last = []
        g = self.heads // kv
        for j, prompt in enumerate(prompts):
            n = len(prompt)
            bias[j, p - n:] = 0.0

            def attend(i, q, k, v, j=j, n=n):
                self.k_prompt[i][j, :, p - n:] = k[0]
                self.v_prompt[i][j, :, p - n:] = v[0]
                out = F.scaled_dot_product_attention(
                    q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=True,
                    scale=1.0)  # the queries carry the scaling
                return out.transpose(1, 2).reshape(1, n, -1)

            ids = torch.tensor([list(prompt)])
            x = F.embedding(ids, self.embed).float()
            last.append(self._layers(x, torch.arange(n)[None], attend)[:, -1])
        # [N, 1, 1, P] per row, for the prompt part of the scores
        self.prompt_bias = bias.repeat_interleave(repeat, 0)[:, None, None, :]
        self.positions = torch.tensor([len(x) - 1 for x in prompts]).repeat_interleave(repeat)
        return self.logits(torch.cat(last)).repeat_interleave(repeat, 0)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """[N] the last sampled token of each row -> [N, V] logits of the next one.

        A row attends to its prompt's shared keys (read once for the prompt's ``repeat`` rows:
        the prompt is most of the context) and to its own generated ones, under one softmax."""
        n = tokens.shape[0]
        col = self.length
        if col >= self.k_gen[0].shape[2]:
            raise RuntimeError("internal: the lean engine's cache is full")
        self.positions = self.positions + 1
        kv, g, d, r = self.kv_heads, self.heads // self.kv_heads, self.head_dim, self.repeat
        u = n // r

        def attend(i, q, k, v):
            kg, vg = self.k_gen[i], self.v_gen[i]
            kg[:, :, col:col + 1] = k
            vg[:, :, col:col + 1] = v
            kp, vp = self.k_prompt[i], self.v_prompt[i]
            p = kp.shape[2]
            q = q.view(n, kv, g, d)
            # the prompt part: the r rows of a prompt as r*g queries of each key/value head
            qp = q.view(u, r, kv, g, d).transpose(1, 2).reshape(u, kv, r * g, d)
            sp = torch.matmul(qp, kp.transpose(-1, -2))  # [U, kv, r*g, P]
            sp = sp.view(u, kv, r, g, p).transpose(1, 2).reshape(n, kv, g, p)
            sg = torch.matmul(q, kg[:, :, :col + 1].transpose(-1, -2))  # [N, kv, g, t]
            # the queries carry the 1/sqrt(d) scaling (load)
            probs = torch.softmax(torch.cat([sp + self.prompt_bias, sg], dim=-1), dim=-1)
            pp = probs[..., :p].reshape(u, r, kv, g, p).transpose(1, 2).reshape(u, kv, r * g, p)
            out = torch.matmul(pp, vp).view(u, kv, r, g, d).transpose(1, 2).reshape(n, kv, g, d)
            out = out + torch.matmul(probs[..., p:], vg[:, :, :col + 1])
            return out.reshape(n, 1, kv * g * d)

        x = F.embedding(tokens[:, None], self.embed).float()
        hidden = self._layers(x, self.positions[:, None], attend)[:, -1]
        self.length = col + 1
        return self.logits(hidden)


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """[N, V] temperature-scaled logits with the tokens outside top-k (0: off) and outside the
    nucleus top-p (1: off) set to -inf, as transformers' TopK and TopP warpers do (in that
    order; at least one token kept)."""
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, order = torch.sort(logits, descending=False, dim=-1)
        cum = ordered.softmax(dim=-1).cumsum(dim=-1)
        drop = cum <= (1 - top_p)
        drop[:, -1] = False
        logits = logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    return logits


def sample_tokens(logits: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    """[N, V] logits -> [N] one token per row drawn from softmax(logits), by inverting the
    cumulative distribution (in float64) at one uniform number per row: exact, and ~50x faster
    on the CPU than ``torch.multinomial`` (which draws a number per vocabulary entry)."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float64)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(logits.shape[0], 1, generator=generator, dtype=torch.float64)
    # the first token whose cumulative mass exceeds u * total: tokens of zero mass never win
    token = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]
    return token.clamp(max=logits.shape[-1] - 1)


class LeanRollout:
    """The lean engine behind the rollout-engine protocol: a plain fp32 HF copy of the policy
    (``plain_model``, kept equal to the trained weights by ``sync``) and the ``LeanDecoder``
    that samples from it in ``dtype``."""

    capabilities = frozenset()

    def __init__(self, model, tokenizer, dtype: str = "bfloat16", rows_hint: int = 8) -> None:
        self.plain_model = model.eval()
        self.tokenizer = tokenizer
        self.eos_ids = eos_token_ids(model.generation_config.eos_token_id, tokenizer)
        self.decoder = LeanDecoder(model, getattr(torch, dtype), rows_hint)

    def sync(self, policy) -> dict:
        norm = sync_plain_copy(self.plain_model, policy)
        if norm != 0.0:  # the same weights pack the same (a run's first sync: its engine and
            # this copy were loaded from one folder), so the decoder keeps what it holds
            self.decoder.load()
        return {"param_update_norm": norm}

    def encode(self, examples: Sequence[Example]) -> list[list[int]]:
        return encode_prompts(self.tokenizer, examples)

    @torch.no_grad()
    def generate(self, examples: Sequence[Example], n: int, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 greedy: bool = False, seed: Optional[int] = None,
                 prompt_ids: Optional[list[list[int]]] = None) -> Rollout:
        """``n`` responses per example; ``Rollout.logprobs`` holds the log-prob (at
        ``temperature``, before top-k/top-p) each sampled token was drawn with."""
        ids = prompt_ids if prompt_ids is not None else self.encode(examples)
        pad = self.tokenizer.pad_token_id
        rows = [i for i in range(len(examples)) for _ in range(n)]
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        logits = self.decoder.prefill(ids, n, max_new_tokens)
        eos = torch.tensor(self.eos_ids)
        done = torch.zeros(len(rows), dtype=torch.bool)
        out_ids, out_logp = [], []
        for t in range(max_new_tokens):
            if t and t % 32 == 0:  # a long step says where its sampling is (the console)
                stage(f"sampling, token {t}/{max_new_tokens}")
            if t:
                logits = self.decoder.step(out_ids[-1])
            if greedy:
                token = logits.argmax(dim=-1)
                logp = torch.zeros(len(rows))
            else:
                scaled = logits / temperature
                token = sample_tokens(filter_logits(scaled, top_k, top_p), gen)
                logp = scaled.log_softmax(dim=-1).gather(1, token[:, None])[:, 0]
            token = torch.where(done, torch.tensor(pad), token)  # finished rows: padding
            out_ids.append(token)
            out_logp.append(logp)
            done |= torch.isin(token, eos)
            if bool(done.all()):
                break
        if out_ids:
            resp, logps = torch.stack(out_ids, dim=1), torch.stack(out_logp, dim=1)
        else:  # nothing generated at all: keep one pad column for shapes
            resp = torch.full((len(rows), 1), pad, dtype=torch.long)
            logps = torch.zeros(len(rows), 1)
        mask, texts = decode_responses(self.tokenizer, resp, self.eos_ids)
        p_ids, p_mask = left_pad([ids[i] for i in rows], pad)
        return Rollout(p_ids, p_mask, resp, mask, texts, rows,
                       logprobs=None if greedy else logps * mask)

    def generate_eval(self, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int, progress=None) -> list[str]:
        """Greedy responses for evaluation, batched by prompt length to limit padding."""
        return greedy_in_batches(self, examples, max_new_tokens, batch_size, progress)
