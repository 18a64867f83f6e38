"""Batches, fragments, transitions and metrics records: the values that flow through plans
(numpy; no torch)."""
