"""The rules' transformer base calls the hooks a rule defines, as LibCST's would, and only those."""

import libcst as cst
import pytest

from portlayer.migrate.engine.dispatch import OwnHooksTransformer


class RenameCallsOfF(OwnHooksTransformer):
    """Renames calls of `f` to `g`, and records what it was shown."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # a lambda's body is not looked into

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if isinstance(updated_node.func, cst.Name) and updated_node.func.value == "f":
            return updated_node.with_changes(func=cst.Name("g"))
        return updated_node


class SameOnLibcstsBase(cst.CSTTransformer):
    visit_Lambda = RenameCallsOfF.visit_Lambda
    visit_Name = RenameCallsOfF.visit_Name
    leave_Call = RenameCallsOfF.leave_Call

    def __init__(self):
        super().__init__()
        self.names: list[str] = []


SOURCE = "x = f(a, f(b))\ny = lambda: f(c)\nh(f)\n"


def test_own_hooks_are_called_as_libcst_calls_them():
    ours, theirs = RenameCallsOfF(), SameOnLibcstsBase()
    assert cst.parse_module(SOURCE).visit(ours).code == cst.parse_module(SOURCE).visit(theirs).code
    assert ours.names == theirs.names == ["x", "f", "a", "f", "b", "y", "h", "f"]
    assert cst.parse_module(SOURCE).visit(RenameCallsOfF()).code == "x = g(a, g(b))\ny = lambda: f(c)\nh(f)\n"


def test_a_hook_is_resolved_per_class():
    class Upper(RenameCallsOfF):
        def visit_Name(self, node: cst.Name) -> None:
            self.names.append(node.value.upper())

    upper = Upper()
    cst.parse_module("f(a)\n").visit(upper)
    plain = RenameCallsOfF()
    cst.parse_module("f(a)\n").visit(plain)
    assert (upper.names, plain.names) == (["F", "A"], ["f", "a"])


def test_an_attribute_hook_is_refused_rather_than_silently_never_called():
    with pytest.raises(TypeError, match="visit_Call_func: attribute hooks are not dispatched"):
        class WatchesCallees(OwnHooksTransformer):  # noqa: F841
            def visit_Call_func(self, node: cst.Call) -> None:
                pass
