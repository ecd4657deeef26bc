"""Beyond one run: baselines, noise-aware comparison, history and trends."""
