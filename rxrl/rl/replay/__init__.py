"""Replay: buffers (uniform, prioritized), the sum tree, n-step folding and the replay shard actor."""
