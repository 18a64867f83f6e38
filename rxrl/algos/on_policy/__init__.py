"""On-policy actor-critic algorithms: PPO, A2C, A3C."""
