"""A test plugin for the vLLM lane: the engine ``vllm-sleep-declared``, vLLM's own engine
(``--engine vllm``) with the sleep capability declared as the CUDA build declares it. vLLM's
CPU build accepts ``sleep`` (it frees nothing) and still pauses its scheduler, so a run through
this engine on a CPU exercises the GPU's life cycle with the real scheduler: a generation that
found the engine asleep and did not wake it would wait or fail."""
from harness.rollouts import ENGINES, EngineEntry

VLLM = ENGINES.get("vllm")


def build(config, source, tokenizer, plain, context=None):
    engine = VLLM.build(config, source, tokenizer, plain, context)
    engine.capabilities = frozenset({"sleep"})
    return engine


if "vllm-sleep-declared" not in ENGINES:
    ENGINES.add("vllm-sleep-declared", EngineEntry(
        build, "vLLM with the CUDA build's sleep capability declared (a test plugin)",
        sized=True, options=VLLM.options, problems=VLLM.problems, probes_cuda=True))
