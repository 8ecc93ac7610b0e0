"""Automatic mixed precision: `torch.cuda.amp.autocast/GradScaler/custom_fwd/custom_bwd`,
`torch.autocast("cuda", ...)`, `torch.amp.autocast("cuda", ...)`, `torch.amp.GradScaler("cuda", ...)`.

neutral: `portlayer.autocast(enabled=True, dtype=None, cache_enabled=None)` and `portlayer.GradScaler(...)`
take no device argument, so the device type is dropped and positional arguments after it become
keywords. Other targets keep torch's classes and name the device type (the Devices rule rewrites a
`"cuda"` first argument; here a missing one, which defaults to "cuda", is added).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of

_AUTOCAST = {"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"}
_GRAD_SCALER = {"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"}
# Keyword names for the positional arguments that follow the device type.
_AUTOCAST_AFTER_DEVICE = ("dtype", "enabled", "cache_enabled")
_CUDA_AMP_AUTOCAST = ("enabled", "dtype", "cache_enabled")


def is_cuda_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda"


class Amp(Rule):
    # A "cuda" literal or torch.cuda.amp, except `torch.amp.GradScaler()`, which means "cuda".
    TRIGGER = Words(("cuda", "GradScaler"))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.excluded(original_node):
            return updated_node
        name = self.qualified(original_node.func)
        if name in _AUTOCAST or name in _GRAD_SCALER:
            return self._device_generic(original_node, updated_node, name in _AUTOCAST)
        if name == "torch.cuda.amp.autocast" and self.target.name == "torch":
            args = self._keywords(updated_node.args, _CUDA_AMP_AUTOCAST)
            return self._rename(original_node, updated_node, "{torch}.autocast", [self._type_arg(), *args])
        if name == "torch.cuda.amp.GradScaler" and self.target.name == "torch":
            return self._rename(original_node, updated_node, "{torch}.amp.GradScaler",
                                [self._type_arg(), *updated_node.args])
        if name in ("torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"):
            return self._custom(original_node, updated_node, name.rsplit(".", 1)[1], updated_node.args)
        return updated_node

    def _device_generic(self, original: cst.Call, node: cst.Call, autocast: bool) -> cst.BaseExpression:
        args = list(node.args)
        device_at = next((i for i, arg in enumerate(args)
                          if (arg.keyword is None and i == 0 and not arg.star)
                          or (arg.keyword is not None and arg.keyword.value in ("device_type", "device"))), None)
        device = args[device_at].value if device_at is not None else None
        if self.target.name == "neutral":
            if device is None and autocast:
                return node  # torch.autocast() without a device type is an error in the input
            if device is not None and not is_cuda_literal(original_args_value(original, device_at)):
                return node  # a device type chosen at run time is device-generic already
            rest = args[device_at + 1:] if device_at == 0 else [a for i, a in enumerate(args) if i != device_at]
            if autocast and device_at == 0:
                rest = self._keywords(rest, _AUTOCAST_AFTER_DEVICE)
            template = "portlayer.autocast" if autocast else "portlayer.GradScaler"
            return self._rename(original, node, template, rest)
        if device is None and not autocast:  # torch.amp.GradScaler() means "cuda"
            self.changed("PL103", original, "torch.amp.GradScaler() -> GradScaler(<device type>)")
            return node.with_changes(args=[self._type_arg(), *args])
        return node

    def _custom(self, original: cst.Call, node: cst.Call, which: str, args) -> cst.BaseExpression:
        device_type = self.keyword("device_type", self._type_expression())
        return self._rename(original, node, "{torch}.amp." + which, [device_type, *args])

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        # `@torch.cuda.amp.custom_fwd` without parentheses.
        name = self.qualified(original_node.decorator)
        if name not in ("torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd") or self.excluded(original_node):
            return updated_node
        which = name.rsplit(".", 1)[1]
        call = cst.Call(self.expression("{torch}.amp." + which),
                        [self.keyword("device_type", self._type_expression())])
        self.changed("PL103", original_node.decorator, f"torch.cuda.amp.{which} -> torch.amp.{which}(device_type=...)")
        return updated_node.with_changes(decorator=call)

    # -- helpers ------------------------------------------------------------------------------------

    def _type_expression(self) -> cst.BaseExpression:
        if self.target.is_vendor:
            return cst.SimpleString(f'"{self.target.vendor}"')
        return self.device_type()

    def _type_arg(self) -> cst.Arg:
        return cst.Arg(self._type_expression())

    @staticmethod
    def _keywords(args, names) -> list[cst.Arg]:
        """Positional arguments given their keyword names, so they survive a change of signature."""
        converted = []
        for position, arg in enumerate(args):
            if arg.keyword is None and not arg.star and position < len(names):
                arg = Rule.keyword(names[position], arg.value).with_changes(comma=arg.comma)
            converted.append(arg)
        return converted

    def _rename(self, original: cst.Call, node: cst.Call, template: str, args) -> cst.Call:
        args = [arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in args]
        func = self.expression(template)
        self.changed("PL103", original, f"{code_of(original.func)}(...) -> "
                                        f"{code_of(func)}(...)")
        return node.with_changes(func=func, args=args)


def original_args_value(original: cst.Call, index: int | None) -> cst.BaseExpression:
    return original.args[index].value
