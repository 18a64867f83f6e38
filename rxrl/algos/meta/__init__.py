"""Meta-learning: MAML."""
