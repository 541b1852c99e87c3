"""The harness engine: config and presets, the one resolution of a run (run.py) and its one
check (preflight.py), data, models, rollout engines, loss, the training loop, the Ray Train
backend, checkpoints and the results store. The command line, benches and reports are in
``lab``."""
