"""Each rule declares the facts about the whole file it reads (`NEEDS`), as a LibCST command declares its
metadata dependencies: the engine computes a fact only when a rule that declares it asks, and a rule reads
one only through `self.fact(FACT)`, which refuses an undeclared one. Every rule's declaration is held here
to its code, both ways: it reads nothing it does not declare, and declares nothing it does not read."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from portlayer.migrate.engine import dataflow, migrate_source, pipeline
from portlayer.migrate.engine.dataflow import INT_NAMES
from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.rules import RULES, base
from portlayer.migrate.rules.base import FileRule

RULES_FOLDER = Path(base.__file__).parent


def facts_read(rule: type) -> set[Fact]:
    """The facts named in `self.fact(...)` calls in the code of `rule` and of the rule classes it inherits
    from (not the bases every rule shares, which read none)."""
    read = set()
    for cls in rule.__mro__:
        module = inspect.getmodule(cls)
        if module is base or not module.__name__.startswith("portlayer.migrate.rules"):
            continue
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(cls)))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fact":
                (argument,) = node.args  # a fact is named where it is read
                fact = getattr(module, argument.id)
                assert isinstance(fact, Fact), f"{cls.__name__} reads {argument.id}, not a Fact"
                read.add(fact)
    return read


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_a_rule_declares_exactly_the_facts_its_code_reads(rule):
    assert facts_read(rule) == set(rule.NEEDS)


def test_the_rules_reach_the_facts_only_through_their_declaration():
    # `self.fact` (rules/base.py) is the one door: no rule reads `context.facts` around it.
    around = []
    for path in sorted(RULES_FOLDER.glob("*.py")):
        if path.name != "base.py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            around += [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
                       if isinstance(node, ast.Attribute) and node.attr == "facts"]
    assert around == []


def test_the_test_sees_what_a_rule_reads():
    # Of the rules with declarations: one from its own code, one through the class it inherits from.
    by_name = {rule.__name__: rule for rule in RULES}
    assert facts_read(by_name["IntDeviceIndices"]) == {INT_NAMES}
    assert facts_read(by_name["Liger"]) == set(by_name["Apex"].NEEDS) != set()


def test_reading_an_undeclared_fact_is_refused(monkeypatch):
    class ReadsWithoutDeclaring(FileRule):
        def check(self) -> None:
            self.fact(INT_NAMES)

    monkeypatch.setattr(pipeline, "RULES", (*RULES, ReadsWithoutDeclaring))
    with pytest.raises(TypeError, match=r"ReadsWithoutDeclaring reads Fact\('the names that hold an int"):
        migrate_source("import torch\ntorch.cuda.synchronize()\n")


def test_a_fact_is_computed_only_for_a_file_one_of_whose_rules_asks_for_it(monkeypatch):
    walks = []
    monkeypatch.setattr(dataflow, "find_int_names", lambda tree, find=dataflow.find_int_names: walks.append(1) or find(tree))
    migrate_source("import torch\ntorch.cuda.synchronize()\nx = torch.ones(2).to(device)\n")
    assert walks == []  # no index name: the rule that needs the int names is not shown a statement
    result = migrate_source("import torch\ntorch.cuda.synchronize()\nx = torch.ones(2).to(local_rank)\n")
    assert walks == [1]  # asked for once, where the rule met `local_rank`
    assert [d.code for d in result.diagnostics] == ["PL412"]
