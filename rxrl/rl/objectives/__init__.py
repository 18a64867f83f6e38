"""Losses and return estimators: GAE, V-trace, PPO's and A2C's losses."""
