"""Rollout engines: turn Examples into sampled responses (token ids + masks + text).

``hf``: transformers ``generate`` on a plain copy of the policy (CPU or one GPU). ``vllm``: a
vLLM engine colocated in each Ray Train worker (GPU), sleeping while the policy trains. Both
take the gathered policy weights through ``load_weights`` after every update and return the
same ``Rollout``.
"""
from harness.rollouts.base import (Rollout, left_pad, render_prompt, response_mask_from_ids,
                                   with_response)
from harness.rollouts.hf import HFRollout, copy_weights

__all__ = ["HFRollout", "Rollout", "copy_weights", "left_pad", "render_prompt",
           "response_mask_from_ids", "with_response"]
