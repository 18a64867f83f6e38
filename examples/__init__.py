"""Runnable examples (a package only so that mypy names them apart from bench/ scripts)."""
