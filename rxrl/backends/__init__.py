"""Interpreters of the plan graph: ``reference`` (the semantics), ``rx`` and ``ray``."""
