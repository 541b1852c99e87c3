"""One training step as named stages, each a function that can be read and tested alone:

    sample     (sample.py)      prompts -> the rollout engine's responses on this worker
    score      (sample.py)      responses -> reward rows, gathered over workers
    passes     (passes.py)      the method's extra no-gradient passes and loss-term preparations
    advantages (advantages.py)  the RolloutBatch -> the method's token advantages, this worker's rows
    plan       (update.py)      which responses go into which micro-batch
    loss       (update.py)      PPO-clip + KL + the method's loss terms, per micro-batch
    optimizer  (update.py)      DeepSpeed backward / step at the mini-batch boundary
    sync       (harness.trainer) the updated weights -> the rollout engine

``harness.trainer.Trainer`` is the loop that calls them; it knows no method by name.
"""
