"""The per-GPU memory plan of a run with the colocated vLLM engine, before any GPU is rented.

Each Ray Train worker owns one GPU, shared by its DeepSpeed engine and its vLLM engine (asleep
while the policy trains). Per GPU the plan adds up, from the model's shape (its config.json, or
the published shape of a paper model) and the run's settings:

- the ZeRO-3 state, resident all run long: 16 bytes per parameter (bf16 weights and gradients,
  fp32 master weights and two Adam moments) over the workers;
- vLLM awake: ``--vllm-gpu-memory`` of the card (or the weights plus ``--vllm-kv-cache-gb``):
  its bf16 weights, a reserve for its activations and CUDA graphs, the rest KV cache;
- the KV tokens that cache holds (keys and values of every layer: 2 x layers x KV heads x head
  dimension x 2 bytes per token) against those one step asks of this worker: its prompts x
  (prompt + G x response), a group's prompt cached once (prefix caching);
- the update's peak for one micro-batch: its fp32 logits and their log-softmax (micro x
  (prompt + response) x vocabulary x 8 bytes) and the activations (with gradient
  checkpointing one layer's inputs per layer plus one layer's working set, ~34 bytes per
  hidden value; without, every layer's working set).

What must fit: ZeRO-3 state + vLLM awake (while generating), ZeRO-3 state + the update's peak
(while training, vLLM asleep). These are estimates from formulas, labelled as such; the first
GPU run's measured figures (``gpu/*`` in the step log) replace them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GIB = 2**30
CARD_BYTES = 80 * GIB  # the card the paper presets are sized for
VLLM_RESERVE_BYTES = int(1.5 * GIB)  # vLLM's profiled activations and CUDA graphs (estimate)
ZERO3_BYTES_PER_PARAM = 16  # bf16 weights 2 + bf16 gradients 2 + fp32 master 4 + Adam 8
ACTIVATION_BYTES = 34  # per hidden value of one layer's working set, bf16 (Korthikanti et al.)


@dataclass(frozen=True)
class Shape:
    """What the plan needs of a decoder's config.json."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qkv_bias: bool = True

    @property
    def params(self) -> int:
        """Parameters: embeddings (and an untied head), attention, gated MLP, norms."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if self.qkv_bias else 0)
        layer = attention + 3 * h * self.intermediate + 2 * h
        return self.vocab * h * (1 if self.tied else 2) + self.layers * layer + h

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Keys and values of one token over every layer (bf16 by default)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    @classmethod
    def of_config(cls, c: dict) -> "Shape":
        heads = c["num_attention_heads"]
        return cls(c["hidden_size"], c["num_hidden_layers"], heads,
                   c.get("num_key_value_heads") or heads,
                   c.get("head_dim") or c["hidden_size"] // heads, c["intermediate_size"],
                   c["vocab_size"], bool(c.get("tie_word_embeddings", False)),
                   c.get("model_type") == "qwen2")


# The paper models' shapes, from their published config.json files, so the plan is known before
# the models are downloaded (a model folder's own config.json is read instead when present).
PUBLISHED = {
    "Qwen2.5-1.5B-Instruct": Shape(1536, 28, 12, 2, 128, 8960, 151936, True),
    "Qwen2.5-3B-Instruct": Shape(2048, 36, 16, 2, 128, 11008, 151936, True),
    "Qwen2.5-Coder-3B-Instruct": Shape(2048, 36, 16, 2, 128, 11008, 151936, True),
    "Qwen2.5-7B-Instruct": Shape(3584, 28, 28, 4, 128, 18944, 152064, False),
    "Qwen2.5-Coder-7B-Instruct": Shape(3584, 28, 28, 4, 128, 18944, 152064, False),
    "Qwen3-4B-Instruct-2507": Shape(2560, 36, 32, 8, 128, 9728, 151936, True, qkv_bias=False),
}


def shape_of(model: str) -> tuple[Shape, str] | None:
    """The model's shape and where it came from: its folder's config.json, else the published
    shape of a paper model by name; None when neither is known."""
    path = Path(model) / "config.json"
    if path.is_file():
        return Shape.of_config(json.loads(path.read_text())), str(path)
    name = Path(model).name
    if name in PUBLISHED:
        return PUBLISHED[name], f"the published config of {name}"
    return None


@dataclass(frozen=True)
class Plan:
    """One GPU's memory, in bytes (see the module's docstring for each formula)."""

    zero3: int
    vllm_awake: int
    vllm_weights: int
    kv: int
    kv_tokens: int
    step_tokens: int
    update_peak: int
    request_tokens: int  # one request's longest: prompt + response
    card: int = CARD_BYTES

    @property
    def generating(self) -> int:
        return self.zero3 + self.vllm_awake

    @property
    def training(self) -> int:
        return self.zero3 + self.update_peak


def plan(shape: Shape, config, card: int = CARD_BYTES) -> Plan:
    r, t = config.rollout, config.training
    weights = shape.params * 2
    if r.vllm_kv_cache_gb > 0:
        kv = int(r.vllm_kv_cache_gb * GIB)
        awake = weights + VLLM_RESERVE_BYTES + kv
    else:
        awake = int(r.vllm_gpu_memory * card)
        kv = max(0, awake - weights - VLLM_RESERVE_BYTES)
    prompts = -(-r.prompts_per_step // t.workers)  # this worker's share, rounded up
    step_tokens = prompts * (r.max_prompt_tokens + r.group_size * r.max_response_tokens)
    length = r.max_prompt_tokens + r.max_response_tokens
    micro = t.micro_batch_size
    logits = micro * length * shape.vocab * 8
    per_layer = micro * length * shape.hidden
    activations = (shape.layers * per_layer * 2 + per_layer * ACTIVATION_BYTES
                   if t.gradient_checkpointing else shape.layers * per_layer * ACTIVATION_BYTES)
    return Plan(zero3=shape.params * ZERO3_BYTES_PER_PARAM // t.workers, vllm_awake=awake,
                vllm_weights=weights, kv=kv, kv_tokens=kv // shape.kv_bytes_per_token(),
                step_tokens=step_tokens, update_peak=logits + activations,
                request_tokens=length, card=card)


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def lines(p: Plan, source: str) -> list[str]:
    """The plan as the dry run prints it."""
    return [
        f"per-GPU plan (an estimate from {source}; the first GPU run's gpu/* figures replace "
        f"it), on a {gib(p.card)} card:",
        f"  ZeRO-3 state (resident): {gib(p.zero3)}",
        f"  vLLM awake: {gib(p.vllm_awake)} = weights {gib(p.vllm_weights)} + reserve "
        f"{gib(VLLM_RESERVE_BYTES)} + KV cache {gib(p.kv)} ({p.kv_tokens:,} tokens)",
        f"  KV tokens one step asks of this GPU: {p.step_tokens:,} (prompts x (prompt + G x "
        f"response), prefix cached); "
        + ("all at once" if p.kv_tokens >= p.step_tokens else
           f"in {-(-p.step_tokens // max(p.kv_tokens, 1))} waves (vLLM queues the rest)"),
        f"  update peak per micro-batch (logits + activations): {gib(p.update_peak)}",
        f"  generating: {gib(p.generating)}; training: {gib(p.training)} of {gib(p.card)}",
    ]


def problems(p: Plan) -> list[str]:
    """What would not fit the card: each with the setting to change."""
    out = []
    if p.generating > p.card:
        out.append(f"per GPU, the ZeRO-3 state ({gib(p.zero3)}) and vLLM awake "
                   f"({gib(p.vllm_awake)}) need {gib(p.generating)}, past the {gib(p.card)} "
                   "card: lower --vllm-gpu-memory or add workers")
    if p.training > p.card:
        out.append(f"per GPU, the ZeRO-3 state ({gib(p.zero3)}) and the update's peak "
                   f"({gib(p.update_peak)}) need {gib(p.training)}, past the {gib(p.card)} "
                   "card: lower --micro-batch-size or turn --gradient-checkpointing on")
    if p.kv <= 0:
        out.append(f"vLLM's share ({gib(p.vllm_awake)}) leaves no KV cache after its weights "
                   f"({gib(p.vllm_weights)}): raise --vllm-gpu-memory")
    elif p.kv_tokens < p.request_tokens:
        out.append(f"vLLM's KV cache holds {p.kv_tokens:,} tokens, fewer than one request of "
                   f"{p.request_tokens:,}: raise --vllm-gpu-memory or --vllm-kv-cache-gb")
    return out


def for_config(config, card: int = CARD_BYTES) -> tuple[Plan, str] | None:
    """The run's plan on ``card`` and its shape's source, for a run on GPUs whose model's shape
    is known."""
    if not config.training.use_gpu:
        return None
    found = shape_of(config.model.model)
    return None if found is None else (plan(found[0], config, card), found[1])
