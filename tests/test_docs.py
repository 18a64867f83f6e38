"""The examples in docs/*.md and in every rxrl docstring run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import rxrl

DOCS = sorted((Path(__file__).parents[1] / "docs").glob("*.md"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules() -> list[str]:
    names = ["rxrl"]
    names += [info.name for info in pkgutil.walk_packages(rxrl.__path__, "rxrl.")]
    return names


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_markdown_examples(path: Path) -> None:
    result = doctest.testfile(str(path), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.failed == 0
