"""Policies and Q-networks (MLP or CNN trunks) and their forward passes: torch and numpy mirrors."""
