"""portlayer/__init__.pyi, the signatures IDEs and type checkers see, names exactly the API the runtime binds,
with torch.cuda's parameters for the mirrored names and the runtime's own for the rest."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

import portlayer
from portlayer.api import ADDITIONS, AMP, MIRRORED
from portlayer.runtime import build
from portlayer.selection import select

STUB = Path(portlayer.__file__).with_suffix(".pyi")


def _stub() -> dict[str, ast.AST]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.ImportFrom):  # `from x import y as y`: a re-export
            names.update({alias.asname: node for alias in node.names if alias.asname == alias.name})
    return names


STUBBED = _stub()


def _parameters(function: ast.FunctionDef) -> list[tuple[str, bool]]:
    """(name, has a default) for each parameter, `self` left out."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    defaults = [False] * (len(positional) - len(arguments.defaults)) + [True] * len(arguments.defaults)
    named = [(a.arg, d) for a, d in zip(positional, defaults)]
    named += [(a.arg, d is not None) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)]
    return [(name, default) for name, default in named if name != "self"]


def _actual(function) -> list[tuple[str, bool]]:
    parameters = inspect.signature(function).parameters.values()
    return [
        (p.name, p.default is not p.empty)
        for p in parameters
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"
    ]


def test_the_stub_names_exactly_the_public_api():
    public = {name for name in STUBBED if not name.startswith("_")}
    assert public == set(portlayer.__all__)
    assert set(portlayer.__all__) >= set(MIRRORED + AMP + ADDITIONS)


@pytest.mark.parametrize("name", [n for n in MIRRORED if isinstance(STUBBED.get(n), ast.FunctionDef)])
def test_each_mirrored_function_takes_torch_cudas_parameters(name):
    assert _parameters(STUBBED[name]) == _actual(getattr(torch.cuda, name))


@pytest.mark.parametrize("name", [n for n in ADDITIONS + ("activate", "patch", "unpatch", "patched")])
def test_each_function_of_portlayers_own_takes_the_bound_ones_parameters(name):
    assert _parameters(STUBBED[name]) == _actual(getattr(portlayer, name))


@pytest.mark.parametrize("name", AMP + ("Event", "Stream"))
def test_each_class_is_constructed_as_the_bound_one_on_the_host(name):
    # The cpu backend's binding, whichever backend this process has active (a vendor's classes take its own).
    host = build(select("cpu"))
    init = next(node for node in STUBBED[name].body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    assert _parameters(init) == _actual(host[name])


def test_every_stubbed_function_and_class_says_what_it_is_in_one_line():
    undocumented = [
        name
        for name, node in STUBBED.items()
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not (ast.get_docstring(node) or "").strip()
    ]
    assert undocumented == []
