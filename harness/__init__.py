"""The harness engine: CLI, config, models, rollout, loss, trainer, backend, results, tables."""
