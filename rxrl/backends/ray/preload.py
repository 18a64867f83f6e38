"""Imported first by every worker process of the local Ray that ``rxrl`` starts, before the process
hosts an actor (Ray's ``preload_python_modules``: `rxrl.training.setup.ray_init_options`): what
such a process does unlike Ray's default — Ray's serializer add-ons only for the packages it
has imported (`rxrl.backends.ray.addons`). Importing it anywhere else does the same to that
process.
"""

from __future__ import annotations

from rxrl.backends.ray import addons

addons.install()

__all__: list[str] = []
