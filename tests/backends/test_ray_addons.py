"""Ray's serializer add-ons in rxrl's local Ray (issue 23, item 4): registered for the packages a
process has imported, without importing the others (`rxrl.backends.ray.addons`).

Each case runs in a fresh process: `install` changes Ray for the whole process, and this one
may have imported pyarrow or pydantic already. That a local Ray's driver and actors import
neither is checked end to end in tests/cli/test_startup.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.helpers import ROOT, environment

#: registers the add-ons on a recording context before and after importing the packages named
#: on the command line; prints what was imported and registered at each point
PROBE = """
import json, sys
from ray.util import serialization_addons
from rxrl.backends.ray import addons

class Recorder:
    def __init__(self):
        self.registered = []
    def _register_cloudpickle_serializer(self, cls, **kwargs):
        self.registered.append(cls.__module__.split(".")[0])
    def _register_cloudpickle_reducer(self, cls, reducer):
        self.registered.append(cls.__module__.split(".")[0])

packages = ("pyarrow", "pydantic")
addons.install()
addons.install()  # idempotent
first = Recorder()
serialization_addons.apply(first)
imported_first = [m for m in packages if m in sys.modules]
for name in sys.argv[1:]:
    __import__(name)
then = Recorder()
serialization_addons.apply(then)
print(json.dumps({"installed": addons.installed(), "imported_first": imported_first,
                  "registered_first": sorted(set(first.registered)),
                  "registered_then": sorted(set(then.registered))}))
"""


def _probe(*imports: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, *imports], cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


def test_add_ons_of_packages_not_imported_neither_import_nor_register_them() -> None:
    doc = _probe()
    assert doc["installed"] is True
    assert doc["imported_first"] == [] and doc["registered_first"] == [], doc


def test_add_ons_of_packages_imported_are_registered_as_ray_registers_them() -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("pydantic")
    doc = _probe("pyarrow", "pydantic")
    assert doc["registered_first"] == []
    registered = doc["registered_then"]
    assert isinstance(registered, list) and {"pyarrow", "pydantic"} <= set(registered), doc
