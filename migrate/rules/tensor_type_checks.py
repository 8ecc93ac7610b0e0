"""`x.type() == "torch.cuda.FloatTensor"`, `x.type() in ["torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"]`:
what a legacy CUDA type string asks of a tensor, its dtype and whether it is on the accelerator, asked of
the target (Megatron-LM's mixed-precision and distributed optimizers sort their parameters so, and raise
on any other type: ported as strings, every parameter on another device was refused).

The target's question (`portlayer.is_accelerator(x)`) answers no on the cpu, as `x.type()` names no CUDA
type on a host without CUDA ("Meaning", rule 2). The vendors spell their own strings (LegacyTensorTypes,
which reports the strings this rule leaves: `x` that is not a name or an attribute chain, which the
question would evaluate twice, or a list that also holds something else).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate import cuda_api
from portlayer.migrate.engine.names import dotted
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of
from portlayer.migrate.rules.precedence import enclosed
from portlayer.migrate.rules.strings import is_method, string_value

_PREFIX = "torch.cuda."


def _typed_tensor(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.type()`, where `x` is a name or an attribute chain (reading it again has no effect)."""
    if isinstance(node, cst.Call) and is_method(node.func, "type") and not node.args \
            and dotted(node.func.value) is not None:
        return node.func.value
    return None


def _dtype(node: cst.BaseExpression) -> str | None:
    """"float32" for the string "torch.cuda.FloatTensor", None for anything else."""
    text = string_value(node) or ""
    return cuda_api.TENSOR_TYPES.get(text[len(_PREFIX):]) if text.startswith(_PREFIX) else None


def _dtypes(operator: cst.BaseCompOp, comparator: cst.BaseExpression) -> list[str] | None:
    """The dtypes a comparison's right side names, each a CUDA type string; None where it is anything else."""
    if isinstance(operator, (cst.Equal, cst.NotEqual)):
        items = [comparator]
    elif isinstance(operator, (cst.In, cst.NotIn)) and isinstance(comparator, (cst.List, cst.Tuple, cst.Set)):
        items = [element.value for element in comparator.elements if not isinstance(element, cst.StarredElement)]
        items = items if len(items) == len(comparator.elements) else []
    else:
        return None
    dtypes = [_dtype(item) for item in items]
    return dtypes if dtypes and None not in dtypes else None


class TensorTypeChecks(Rule):
    TRIGGER = Words(("cuda",))

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.is_vendor

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.BaseExpression:
        tensor = _typed_tensor(original_node.left)
        if tensor is None or len(original_node.comparisons) != 1 or self.excluded(original_node):
            return updated_node
        comparison = original_node.comparisons[0]
        dtypes = _dtypes(comparison.operator, comparison.comparator)
        if dtypes is None:
            return updated_node
        x = code_of(tensor)
        kinds = ", ".join(f"{{torch}}.{dtype}" for dtype in dtypes)
        dtype_test = f"{x}.dtype == {kinds}" if len(dtypes) == 1 else f"{x}.dtype in ({kinds})"
        asked = f"{dtype_test} and {self.target.question_tensor.replace('{value}', x)}"
        if isinstance(comparison.operator, (cst.NotEqual, cst.NotIn)):
            asked = f"not ({asked})"
        replacement = enclosed(self.expression(asked), original_node, self.parent(original_node))
        self.changed("PL106", original_node, f"{code_of(original_node)} -> {code_of(replacement)}")
        return replacement
