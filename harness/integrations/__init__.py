"""The registered methods in trainers people already run: ``trl.py`` makes any method (built-in,
composed, or from a plugin) the advantage of TRL's ``GRPOTrainer``; ``verl.py`` makes the
sequence-level ones verl advantage estimators (docs/integrations.md)."""
