"""A LibCST transformer that calls only the visit_/leave_ methods its class defines.

LibCST looks a transformer's hooks up by name for every node (`visit_Call`, `leave_Call`) and for every
child attribute of every node (`visit_Call_func`, ...), and its base class defines a no-op for each, so
every lookup finds a method to call. The rules define a handful: on the rules' modules the lookups and
no-op calls were a third of a rule's time. Here each class resolves a node type's hooks once.
Attribute hooks are not dispatched at all; a subclass that defines one is refused when it is created.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

_ATTRIBUTE_HOOK = re.compile(r"(?:visit|leave)_[A-Z]\w*?_[a-z]\w*")


class OwnHooksTransformer(cst.CSTTransformer):
    _visits: dict[type, Callable | None] = {}
    _leaves: dict[type, Callable | None] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        hooks = [name for name in vars(cls) if _ATTRIBUTE_HOOK.fullmatch(name)]
        if hooks:
            raise TypeError(f"{cls.__name__}.{hooks[0]}: attribute hooks are not dispatched")
        cls._visits, cls._leaves = {}, {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        try:
            visit = self._visits[kind]
        except KeyError:
            visit = self._visits[kind] = own_hook(type(self), f"visit_{kind.__name__}")
        return visit is None or visit(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        kind = type(original_node)
        try:
            leave = self._leaves[kind]
        except KeyError:
            leave = self._leaves[kind] = own_hook(type(self), f"leave_{kind.__name__}")
        return updated_node if leave is None else leave(self, original_node, updated_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def own_hook(cls: type, name: str) -> Callable | None:
    """`cls`'s method `name`, or None where it is LibCST's no-op."""
    method = getattr(cls, name, None)
    return None if method is None or method is getattr(cst.CSTTransformer, name, None) else method
