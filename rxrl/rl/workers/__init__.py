"""Rollout workers: step envs with a policy and hand out fragments, transitions or gradients."""
