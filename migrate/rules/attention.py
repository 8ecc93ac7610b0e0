"""CUDA-only attention kernels to `torch.nn.functional.scaled_dot_product_attention` (SDPA), where the
portable form is exact under the library's documented semantics; the rest is reported (PL230, PL231).

Every target gets the same code: SDPA is in upstream torch, so the output needs neither portlayer nor a
vendor module, and each rewrite stays one expression that reads as the semantics it keeps:

- flash-attn takes (batch, seqlen, heads, headdim), SDPA (batch, heads, seqlen, headdim): transpose in
  and out, and `.contiguous()` so that the caller's `.view(...)` still works on the result;
- flash-attn's `causal=True` with seqlen_q != seqlen_k is aligned to the bottom right (flash-attn >= 2.1),
  SDPA's `is_causal` to the top left: an explicit mask `ones(Lq, Lk).tril(Lk - Lq)` (a row with no key
  gives zeros in both); `window_size=(left, right)` narrows it with `.tril(Lk - Lq + right)` and
  `.triu(Lk - Lq - left)`; `causal` sets `right` to 0. A square problem (qkv packed) keeps `is_causal`;
- fewer K/V heads than Q heads (MQA/GQA) maps to `enable_gqa=True` (the same grouping: Q head h reads
  K/V head h // (Hq // Hk)); `softmax_scale` to `scale`; `dropout_p` passes through (both libraries apply
  it whenever it is non-zero: the caller's own `if self.training else 0.0` is kept);
- `flash_attn_varlen_func` (packed sequences, `cu_seqlens`) becomes one SDPA per sequence, so no token
  attends across a packed boundary;
- xformers' `memory_efficient_attention` takes [B, M, H, K] (also [B, M, K] and [B, M, G, H, K]):
  `.movedim(1, -2)` in and `.movedim(-2, 1)` out fits all three; its `LowerTriangularMask` is top-left
  aligned, which is SDPA's `is_causal`;
- `torch.backends.cuda.sdp_kernel(...)` / `torch.nn.attention.sdpa_kernel(...)` restricted to CUDA's fused
  kernels: `torch.nn.attention.sdpa_kernel([...])` with the same kernels plus `SDPBackend.MATH`, which
  every device has (the fused ones stay first choice where they exist).

An argument that has no exact SDPA form (`return_attn_probs=True`, ALiBi slopes, softcapping, a
`window_size` or xformers bias not written out in the call) leaves the call as it is, with a report.
Sources: Dao-AILab/flash-attention@0251105a flash_attn/flash_attn_interface.py (docstrings of
flash_attn_func and flash_attn_varlen_func), facebookresearch/xformers@115df95f
xformers/ops/fmha/__init__.py (memory_efficient_attention's docstring) and attn_bias.py
(`_materialize_causal_mask`); the numerical tests in tests/migrate/test_attention_numerics.py.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.printing import code_of
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.library_calls import (
    UNREAD,
    Arguments,
    LibraryCalls,
    Portable,
    Refused,
    Row,
    differs,
)

# Each function's parameters in order (flash-attn 2.x; 2.6 added softcap).
_FLASH = {
    "flash_attn_func": ("q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
                        "alibi_slopes", "deterministic", "return_attn_probs"),
    "flash_attn_qkvpacked_func": ("qkv", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
                                  "alibi_slopes", "deterministic", "return_attn_probs"),
    "flash_attn_kvpacked_func": ("q", "kv", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
                                 "alibi_slopes", "deterministic", "return_attn_probs"),
    "flash_attn_varlen_func": ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
                               "dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
                               "deterministic", "return_attn_probs", "block_table"),
}
# Arguments whose only exact value is their default: anything else keeps the call.
_DEFAULT_ONLY = {"softcap": 0.0, "alibi_slopes": None, "return_attn_probs": False, "block_table": None}
_XFORMERS_PARAMETERS = ("query", "key", "value", "attn_bias", "p", "scale", "op", "output_dtype")
_LOWER_TRIANGULAR = {"xformers.ops.LowerTriangularMask", "xformers.ops.fmha.LowerTriangularMask",
                     "xformers.ops.fmha.attn_bias.LowerTriangularMask"}
_SDP_KERNEL = "torch.backends.cuda.sdp_kernel"
_SDPA_KERNEL = "torch.nn.attention.sdpa_kernel"
_SDP_BACKEND = "torch.nn.attention.SDPBackend."
# sdp_kernel's switches (all default True) in its signature's order, and the SDPBackend each enables in
# torch's priority order.
_SWITCH_PARAMETERS = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
_SWITCHES = (("enable_flash", "FLASH_ATTENTION"), ("enable_mem_efficient", "EFFICIENT_ATTENTION"),
             ("enable_cudnn", "CUDNN_ATTENTION"), ("enable_math", "MATH"))


class Unsupported(Exception):
    """An argument with no exact SDPA form: the message says which."""


def _flash(function: str):
    def convert(args: Arguments) -> Portable | Refused:
        try:
            return _flash_portable(function, args)
        except Unsupported as reason:
            return Refused(str(reason))
    return convert


def _flash_portable(function: str, args: Arguments) -> Portable:
    unsupported = differs(args, **_DEFAULT_ONLY)
    if unsupported:
        raise Unsupported(f"{unsupported} has no SDPA equivalent")
    left, right = _window(args)
    causal = args.nodes.get("causal")
    causal_flag = args.value("causal", None) if causal is not None else None
    if causal_flag is False:
        causal = None
    if causal is not None and causal_flag is UNREAD and (left, right) != (-1, -1):
        raise Unsupported("a sliding window with a `causal` decided at run time")
    if causal is not None:
        right = 0  # flash-attn: causal is a window with no keys to the right
    options = _options(args, "dropout_p", "softmax_scale")
    message = "torch.nn.functional.scaled_dot_product_attention(...)"
    if function == "flash_attn_varlen_func":
        return Portable(_varlen(args, causal, left, right, options), (), "one " + message + " per sequence",
                        whole=True)
    if function == "flash_attn_qkvpacked_func":
        inputs = f"*{_atom(args.nodes['qkv'])}.transpose(1, 3).unbind(2)"
        queries = keys = args.nodes["qkv"]
        square = True
    else:
        queries = args.nodes["q"]
        if function == "flash_attn_kvpacked_func":
            keys = args.nodes["kv"]
            inputs = f"{_atom(queries)}.transpose(1, 2), *{_atom(keys)}.transpose(1, 3).unbind(2)"
        else:
            keys = args.nodes["k"]
            inputs = ", ".join(f"{_atom(args.nodes[x])}.transpose(1, 2)" for x in ("q", "k", "v"))
        square = False
        options.append("enable_gqa=True")
    mask = _mask(causal, left, right, "{q}.size(1)", "{k}.size(1)", "{q}.device", square, options)
    if mask:  # the mask reads the inputs' shapes: they must be safe to evaluate again
        mask = mask.replace("{q}", _pure(queries, "q")).replace("{k}", _pure(keys, "k"))
    text = _sdpa_text([inputs, *([mask] if mask else []), *options], ".transpose(1, 2).contiguous()", "")
    return Portable(text, (), message, whole=True)


def _varlen(args: Arguments, causal, left: int, right: int, options: list[str]) -> str:
    q, k, v = (_pure(args.nodes[x], x) for x in ("q", "k", "v"))
    cu_q, cu_k = (_pure(args.nodes[x], x) for x in ("cu_seqlens_q", "cu_seqlens_k"))
    options.append("enable_gqa=True")
    mask = _mask(causal, left, right, "q_end - q_start", "k_end - k_start", f"{q}.device", False, options)
    inputs = (f"{q}[q_start:q_end].transpose(0, 1), {k}[k_start:k_end].transpose(0, 1), "
              f"{v}[k_start:k_end].transpose(0, 1)")
    # libcst indents continuation lines under the statement's block itself: indents here are relative.
    per_sequence = _sdpa_text([inputs, *([mask] if mask else []), *options], ".transpose(0, 1)", "    ")
    bounds = f"zip({cu_q}[:-1].tolist(), {cu_q}[1:].tolist(), {cu_k}[:-1].tolist(), {cu_k}[1:].tolist())"
    return f"{{torch}}.cat([\n    {per_sequence}\n    for q_start, q_end, k_start, k_end in {bounds}\n])"


def _mask(causal, left: int, right: int, length_q: str, length_k: str, device: str, square: bool,
          options: list[str]) -> str:
    """The `attn_mask=...` argument (empty for none); a square causal mask goes into `options` as
    `is_causal`, which is exact there."""
    if square and (left, right) == (-1, 0) and causal is not None:
        options.insert(0, f"is_causal={_code(causal)}")
        return ""
    offset = "" if square else f"{_grouped(length_k)} - {_grouped(length_q)}"
    bands = []
    if right >= 0:
        bands.append(f".tril({_plus(offset, right)})")
    if left >= 0:
        bands.append(f".triu({_plus(offset, -left)})")
    if not bands:
        return ""
    mask = f"{{torch}}.ones({length_q}, {length_k}, dtype={{torch}}.bool, device={device}){''.join(bands)}"
    if causal is not None and _bool_literal(causal) is None:
        mask = f"{mask} if {_code(causal)} else None"
    return "attn_mask=" + mask


def _options(args: Arguments, dropout: str, scale: str) -> list[str]:
    options = []
    if args.given(dropout):
        options.append(f"dropout_p={_code(args.nodes[dropout])}")
    if args.given(scale) and args.value(scale) is not None:
        options.append(f"scale={_code(args.nodes[scale])}")
    return options


def _sdpa_text(arguments: list[str], after: str, indent: str) -> str:
    """One argument group a line (inputs, mask, options); `indent` is relative to the statement's block."""
    inputs, *rest = arguments
    lines = [inputs]
    if rest and rest[0].startswith("attn_mask="):
        lines.append(rest.pop(0))
    if rest:
        lines.append(", ".join(rest))
    body = "".join(f"\n{indent}    {line}," for line in lines)
    return f"{{torch}}.nn.functional.scaled_dot_product_attention({body}\n{indent}){after}"


class Attention(LibraryCalls):
    TRIGGER = Words(("flash_attn", "memory_efficient_attention", "sdp_kernel", "sdpa_kernel"))
    LIBRARIES = frozenset({"flash_attn", "xformers"})

    @classmethod
    def file_words(cls, target) -> Words:
        # A library's function is the rule's only where a line imports the library: `flash_attn` alone is in
        # every HuggingFace model file (`_supports_flash_attn = True`), which then went through the rules.
        return Words(("sdp_kernel", "sdpa_kernel"), imported=tuple(cls.LIBRARIES))

    def __init__(self, *args):
        super().__init__(*args)
        flash = {name: Row(parameters, _flash(name), "PL130", "PL230") for name, parameters in _FLASH.items()}
        xformers = Row(_XFORMERS_PARAMETERS, self._xformers, "PL131", "PL231", required=3)
        self.ROWS = {
            **{f"{module}.{name}": row for module in ("flash_attn", "flash_attn.flash_attn_interface")
               for name, row in flash.items()},
            **dict.fromkeys(("xformers.ops.memory_efficient_attention",
                             "xformers.ops.fmha.memory_efficient_attention"), xformers),
        }
        self._causal_bias = False  # the xformers call being converted has `attn_bias=LowerTriangularMask()`

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self.qualified(original_node.func)
        if name in (_SDP_KERNEL, _SDPA_KERNEL) and not self.excluded(original_node):
            return self._kernel_choice(original_node, updated_node, name)
        bias = Arguments(original_node, _XFORMERS_PARAMETERS).nodes.get("attn_bias")
        self._causal_bias = (isinstance(bias, cst.Call) and not bias.args
                             and self.qualified(bias.func) in _LOWER_TRIANGULAR)
        return super().leave_Call(original_node, updated_node)

    def _xformers(self, args: Arguments) -> Portable | Refused:
        if args.given("output_dtype") and args.value("output_dtype") is not None:
            return Refused("output_dtype has no SDPA equivalent: cast the result")
        options = []
        if self._causal_bias:
            options.append("is_causal=True")  # xformers' LowerTriangularMask is top-left aligned, as is_causal
        elif args.given("attn_bias") and args.value("attn_bias") is not None:
            return Refused(f"attn_bias={code_of(args.nodes['attn_bias'])} is not written as LowerTriangularMask() "
                           "here")
        options += _options(args, "p", "scale")
        inputs = ", ".join(f"{_atom(args.nodes[x])}.movedim(1, -2)" for x in ("query", "key", "value"))
        return Portable(_sdpa_text([inputs, *options], ".movedim(-2, 1).contiguous()", ""), (),
                        "torch.nn.functional.scaled_dot_product_attention(...)", whole=True)

    def _kernel_choice(self, original: cst.Call, node: cst.Call, name: str) -> cst.BaseExpression:
        """The same kernels first, and `SDPBackend.MATH` (every device has it) where it is missing; a choice
        not written out is left to BackendFlags' report (sdp_kernel) or as it is (sdpa_kernel)."""
        if name == _SDP_KERNEL:
            args = Arguments(original, _SWITCH_PARAMETERS)
            flags = {switch: args.value(switch, True) for switch in _SWITCH_PARAMETERS}
            if args.unknown or args.foreign or not all(isinstance(flag, bool) for flag in flags.values()):
                return node
            prefix = "{torch}.nn.attention.SDPBackend."
            chosen = [prefix + backend for switch, backend in _SWITCHES if flags[switch]]
            function, rest = "{torch}.nn.attention.sdpa_kernel", []
        else:
            args = Arguments(original, ("backends", "set_priority"))
            backends = args.nodes.get("backends")
            elements = ([element.value for element in backends.elements]
                        if isinstance(backends, (cst.List, cst.Tuple)) else [backends])
            names = [self.qualified(element) for element in elements if element is not None]
            if backends is None or args.unknown or args.foreign or len(names) != len(elements) or not all(
                    n and n.startswith(_SDP_BACKEND) for n in names) or _SDP_BACKEND + "MATH" in names:
                return node  # not SDPBackend members written out, or the math kernel is already allowed
            chosen = [_code(element) for element in elements]
            prefix = chosen[0][: chosen[0].rindex(".") + 1]
            function = _code(node.func)
            rest = [f"set_priority={_code(args.nodes['set_priority'])}"] if args.given("set_priority") else []
        if prefix + "MATH" not in chosen:
            chosen.append(prefix + "MATH")
        self.changed("PL132", original, f"{name}(...) -> torch.nn.attention.sdpa_kernel([..., SDPBackend.MATH])",
                     needs_runtime=False)
        return self.expression(f"{function}([{', '.join(chosen)}]{''.join(', ' + r for r in rest)})")


def _window(args: Arguments) -> tuple[int, int]:
    """(left, right) of a `window_size` written as a literal pair; -1 means unbounded."""
    window = args.value("window_size", (-1, -1))
    if isinstance(window, (tuple, list)) and len(window) == 2 and all(type(x) is int for x in window):
        return window[0], window[1]
    raise Unsupported(f"window_size={code_of(args.nodes['window_size'])} is not a literal pair of ints")


def _bool_literal(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _code(node: cst.BaseExpression) -> str:
    """`node`'s code for a template (`{torch}` is the only field): braces doubled."""
    return code_of(node).replace("{", "{{").replace("}", "}}")


def _pure(node: cst.BaseExpression, what: str) -> str:
    """`node`'s code, when evaluating it twice is evaluating it once (a name, an attribute, an index)."""
    if _is_pure(node):
        return _code(node)
    raise Unsupported(f"`{what}` is read more than once by the portable form and `{code_of(node)}` "
                      "may not give the same value twice: assign it to a name first")


def _is_pure(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Name, cst.Integer)):
        return True
    if isinstance(node, cst.Attribute):
        return _is_pure(node.value)
    if isinstance(node, cst.Subscript):
        return _is_pure(node.value) and all(
            isinstance(element.slice, cst.Index) and _is_pure(element.slice.value) for element in node.slice)
    return False


def _atom(node: cst.BaseExpression) -> str:
    """`node`'s code, parenthesised where a method call on it would bind to a part of it."""
    atomic = isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) or node.lpar
    return _code(node) if atomic else f"({_code(node)})"


def _grouped(expression: str) -> str:
    return f"({expression})" if " " in expression else expression


def _plus(offset: str, value: int) -> str:
    if not offset:
        return str(value)
    if value == 0:
        return offset
    return f"{offset} {'+' if value > 0 else '-'} {abs(value)}"
