"""Replay: buffers (uniform, prioritized; pixel frames stored once), sum tree, n-step folding, shard actor."""
