"""Policies, Q-networks and their forward passes: torch modules and their numpy mirrors for rollouts."""
