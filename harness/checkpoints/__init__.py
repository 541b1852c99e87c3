"""Step checkpoints and resume.

A run with ``--save-every N`` saves, every N steps, everything that makes the next step what it
would have been: the DeepSpeed engine (parameters, ZeRO partitions, optimizer), every worker's
RNG states, the prompt sampler's position, the step, and the per-step log so far
(:mod:`harness.checkpoints.state`). The checkpoints go through Ray Train's checkpoint API into a
fixed folder per seed (:mod:`harness.checkpoints.store`), so that Ray Train restarts a crashed
worker group from the latest one (``--max-failures``) and re-running the same command resumes
there; only checkpoints Ray Train registered as complete are ever picked. The folder is removed
once the seed's result is stored.
"""
