"""Learners: own a policy and its optimizer, train on batches, hand out weights and state."""
