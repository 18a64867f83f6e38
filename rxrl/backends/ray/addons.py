"""Ray's serializer add-ons for the packages a process has imported, not for every package installed.

Every Ray process, at its first serialization, registers custom serializers for pydantic,
starlette and pyarrow objects (``ray.util.serialization_addons.apply``), importing each
package that is installed to do so: 15-30 MB of memory per process for pyarrow and
pydantic, in every process of a run — driver and actors — that never sends such an object
(docs/benchmarks.md, "Memory (issue 23)"). `install` makes a process register a package's serializers
only if it has imported that package by then; an object of a package imported later still
crosses processes, by its own pickling (pyarrow's tables, pydantic's models), which Ray's
serializers only make faster (pyarrow: a table slice without its whole buffer) or possible
for pydantic v1's ``ModelField`` (FastAPI's; Ray Serve's processes are not rxrl's).

A local Ray that ``rxrl`` starts lean (`rxrl.backends.ray.connect.is_lean`) installs it in
the driver (`rxrl.backends.ray.connect.connect`) and, through `rxrl.backends.ray.preload`, in
every worker process (`rxrl.training.setup.ray_init_options`); other Rays are left as they are.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ray.util import serialization_addons

#: marks the installed ``apply``, so that `install` is idempotent
_INSTALLED = "_rxrl_imported_only"


def install() -> None:
    """From now on, a serialization context created in this process registers Ray's add-on
    serializers only for the packages (pydantic, starlette, pyarrow) already imported."""
    addons: Any = serialization_addons
    if getattr(addons.apply, _INSTALLED, False):
        return

    def apply(context: Any) -> None:
        """``ray.util.serialization_addons.apply`` (Ray 2.60), each part only if its package is
        imported."""
        if "pydantic" in sys.modules:
            pydantic_compat: Any = importlib.import_module("ray._common.pydantic_compat")
            pydantic_compat.register_pydantic_serializers(context)
        if "starlette" in sys.modules:
            addons.register_starlette_serializer(context)
        if "pyarrow" in sys.modules and sys.platform != "win32":
            arrow: Any = importlib.import_module("ray._private.arrow_serialization")
            arrow._register_custom_datasets_serializers(context)

    setattr(apply, _INSTALLED, True)
    addons.apply = apply


def installed() -> bool:
    """Whether `install` has run in this process."""
    return bool(getattr(serialization_addons.apply, _INSTALLED, False))


__all__ = ["install", "installed"]
