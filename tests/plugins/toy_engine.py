"""A test plugin: a rollout engine of its own, registered without any edit of the harness:
transformers ``generate`` on the plain copy of the policy, each sample with its own prefill."""
from harness.rollouts import ENGINES, EngineEntry, HFRollout


def build(config, source, tokenizer, plain, context=None):
    """``plain()`` loads the plain HF copy of the policy that the trainer keeps in sync."""
    return HFRollout(plain(), tokenizer, "cpu", share_prefill=False)


def problems(config, here=True, cuda=None):
    """Its own checks, before Ray starts (each with its fix)."""
    if config.training.use_gpu:
        return ["--engine hf-unshared samples on the CPU; drop --use-gpu"]
    return []


ENGINES.add("hf-unshared", EngineEntry(build, "generate with one prefill per sample (a test "
                                              "plugin)", problems=problems))
