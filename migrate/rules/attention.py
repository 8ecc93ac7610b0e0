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
from portlayer.migrate.rules.base import Rule

_FLASH_MODULES = ("flash_attn", "flash_attn.flash_attn_interface")
# Each function's parameters in order (flash-attn 2.x; 2.6 added softcap), keyword-only ones excluded.
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
_FLASH_NAMES = {f"{module}.{name}": name for module in _FLASH_MODULES for name in _FLASH}
# Arguments whose only exact value is their default: anything else keeps the call.
_DEFAULT_ONLY = {"softcap": ("0", "0.0"), "alibi_slopes": ("None",), "return_attn_probs": ("False",),
                 "block_table": ("None",)}
_XFORMERS = {"xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention"}
_XFORMERS_PARAMETERS = ("query", "key", "value", "attn_bias", "p", "scale")
_LOWER_TRIANGULAR = {"xformers.ops.LowerTriangularMask", "xformers.ops.fmha.LowerTriangularMask",
                     "xformers.ops.fmha.attn_bias.LowerTriangularMask"}
_SDP_KERNEL = "torch.backends.cuda.sdp_kernel"
_SDPA_KERNEL = {"torch.nn.attention.sdpa_kernel"}
_SDP_BACKEND = "torch.nn.attention.SDPBackend."
# sdp_kernel's switches (all default True) in its signature's order, and the SDPBackend each enables in
# torch's priority order.
_SWITCH_PARAMETERS = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
_SWITCHES = (("enable_flash", "FLASH_ATTENTION"), ("enable_mem_efficient", "EFFICIENT_ATTENTION"),
             ("enable_cudnn", "CUDNN_ATTENTION"), ("enable_math", "MATH"))


class Unsupported(Exception):
    """The call has an argument with no exact SDPA form: the message says which."""


class Attention(Rule):
    TRIGGER = Words(("flash_attn", "memory_efficient_attention", "sdp_kernel", "sdpa_kernel"))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self.qualified(original_node.func)
        if name is None or self.excluded(original_node) or _head(original_node.func) in self.context.left_to_program:
            return updated_node  # the program's own fallback or availability check decides this call
        try:
            if name in _FLASH_NAMES:
                return self._flash(original_node, updated_node, _FLASH_NAMES[name])
            if name in _XFORMERS:
                return self._xformers(original_node, updated_node)
            if name == _SDP_KERNEL or name in _SDPA_KERNEL:
                return self._kernel_choice(original_node, updated_node, name)
        except Unsupported as reason:
            code = "PL231" if name in _XFORMERS else "PL230"
            self.report(code, original_node, f"{name.rsplit('.', 1)[1]}(...) left as is: {reason}")
        return updated_node

    # -- flash-attn ---------------------------------------------------------------------------------

    def _flash(self, original: cst.Call, node: cst.Call, function: str) -> cst.BaseExpression:
        args = _bind(original, _FLASH[function])
        for parameter, defaults in _DEFAULT_ONLY.items():
            if parameter in args and code_of(args[parameter]) not in defaults:
                raise Unsupported(f"{parameter}={code_of(args[parameter])} has no SDPA equivalent")
        left, right = _window(args.get("window_size"))
        causal = args.get("causal")
        causal_flag = None if causal is None else _bool_literal(causal)
        if causal_flag is False:
            causal = None
        if causal is not None and causal_flag is None and (left, right) != (-1, -1):
            raise Unsupported("a sliding window with a `causal` decided at run time")
        if causal is not None:
            right = 0  # flash-attn: causal is a window with no keys to the right
        if function == "flash_attn_varlen_func":
            return self._varlen(original, args, causal, left, right)
        options = self._options(args, "dropout_p", "softmax_scale")
        if function == "flash_attn_qkvpacked_func":
            inputs = f"*{_atom(args['qkv'])}.transpose(1, 3).unbind(2)"
            queries = keys = args["qkv"]
            square = True
        else:
            queries = args["q"]
            if function == "flash_attn_kvpacked_func":
                inputs = f"{_atom(queries)}.transpose(1, 2), *{_atom(args['kv'])}.transpose(1, 3).unbind(2)"
                keys = args["kv"]
            else:
                inputs = ", ".join(f"{_atom(args[x])}.transpose(1, 2)" for x in ("q", "k", "v"))
                keys = args["k"]
            square = False
            options.append("enable_gqa=True")
        mask = self._mask(causal, left, right, "{q}.size(1)", "{k}.size(1)", "{q}.device", square, options)
        if mask:  # the mask reads the inputs' shapes: they must be safe to evaluate again
            mask = mask.replace("{q}", _pure(queries, "q")).replace("{k}", _pure(keys, "k"))
        call = self._sdpa([inputs, *([mask] if mask else []), *options], ".transpose(1, 2).contiguous()", original)
        self.changed("PL130", original, f"{function}(...) -> torch.nn.functional.scaled_dot_product_attention(...)",
                     needs_runtime=False)
        return call

    def _varlen(self, original: cst.Call, args: dict[str, cst.BaseExpression], causal, left: int,
                right: int) -> cst.BaseExpression:
        q, k, v = (_pure(args[x], x) for x in ("q", "k", "v"))
        cu_q, cu_k = (_pure(args[x], x) for x in ("cu_seqlens_q", "cu_seqlens_k"))
        options = [*self._options(args, "dropout_p", "softmax_scale"), "enable_gqa=True"]
        mask = self._mask(causal, left, right, "q_end - q_start", "k_end - k_start", f"{q}.device", False,
                          options)
        inputs = f"{q}[q_start:q_end].transpose(0, 1), {k}[k_start:k_end].transpose(0, 1), " \
                 f"{v}[k_start:k_end].transpose(0, 1)"
        indent = ""  # libcst indents continuation lines under the statement's block itself
        per_sequence = self._sdpa_text([inputs, *([mask] if mask else []), *options], ".transpose(0, 1)",
                                       indent + "    ")
        bounds = (f"zip({cu_q}[:-1].tolist(), {cu_q}[1:].tolist(), {cu_k}[:-1].tolist(), {cu_k}[1:].tolist())")
        text = (f"{{torch}}.cat([\n{indent}    {per_sequence}\n{indent}    for q_start, q_end, k_start, k_end in "
                f"{bounds}\n{indent}])")
        self.changed("PL130", original, "flash_attn_varlen_func(...) -> one "
                                        "torch.nn.functional.scaled_dot_product_attention(...) per sequence",
                     needs_runtime=False)
        return self._parse(text)

    def _mask(self, causal, left: int, right: int, length_q: str, length_k: str, device: str, square: bool,
              options: list[str]) -> str:
        """The `attn_mask=...` argument (empty for none); a square causal mask goes into `options` as
        `is_causal`, which is exact there."""
        if square and (left, right) == (-1, 0) and causal is not None:
            options.insert(0, f"is_causal={code_of(causal)}")
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
            mask = f"{mask} if {code_of(causal)} else None"
        return "attn_mask=" + mask

    @staticmethod
    def _options(args: dict[str, cst.BaseExpression], dropout: str, scale: str) -> list[str]:
        options = []
        if dropout in args:
            options.append(f"dropout_p={code_of(args[dropout])}")
        if scale in args and code_of(args[scale]) != "None":
            options.append(f"scale={code_of(args[scale])}")
        return options

    # -- xformers -----------------------------------------------------------------------------------

    def _xformers(self, original: cst.Call, node: cst.Call) -> cst.BaseExpression:
        args = _bind(original, _XFORMERS_PARAMETERS, keyword_only=("op", "output_dtype"))
        if "output_dtype" in args and code_of(args["output_dtype"]) != "None":
            raise Unsupported("output_dtype has no SDPA equivalent: cast the result")
        options = []
        bias = args.get("attn_bias")
        if bias is not None and code_of(bias) != "None":
            if not (isinstance(bias, cst.Call) and not bias.args and self.qualified(bias.func) in _LOWER_TRIANGULAR):
                raise Unsupported(f"attn_bias={code_of(bias)} is not written as LowerTriangularMask() here")
            options.append("is_causal=True")  # xformers' LowerTriangularMask is top-left aligned, as is_causal
        options += self._options(args, "p", "scale")
        inputs = ", ".join(f"{_atom(args[x])}.movedim(1, -2)" for x in ("query", "key", "value"))
        call = self._sdpa([inputs, *options], ".movedim(-2, 1).contiguous()", original)
        self.changed("PL131", original, "memory_efficient_attention(...) -> "
                                        "torch.nn.functional.scaled_dot_product_attention(...)", needs_runtime=False)
        return call

    # -- kernel choice ------------------------------------------------------------------------------

    def _kernel_choice(self, original: cst.Call, node: cst.Call, name: str) -> cst.BaseExpression:
        if name == _SDP_KERNEL:
            args = _bind(original, _SWITCH_PARAMETERS)
            flags = {switch: True if switch not in args else _bool_literal(args[switch]) for switch, _ in _SWITCHES}
            if None in flags.values():
                raise Unsupported("its switches are decided at run time")
            prefix = "{torch}.nn.attention.SDPBackend."
            chosen = [prefix + backend for switch, backend in _SWITCHES if flags[switch]]
            rest = []
            function = "{torch}.nn.attention.sdpa_kernel"
        else:
            args = _bind(original, ("backends", "set_priority"))
            backends = args.get("backends")
            elements = ([element.value for element in backends.elements]
                        if isinstance(backends, (cst.List, cst.Tuple)) else [backends])
            names = [self.qualified(element) for element in elements]
            if backends is None or not all(n and n.startswith(_SDP_BACKEND) for n in names):
                return node  # not a list of SDPBackend members written out: nothing to say about it
            if _SDP_BACKEND + "MATH" in names:
                return node  # every device has the math kernel: portable as written
            chosen = [code_of(element) for element in elements]
            prefix = chosen[0][: chosen[0].rindex(".") + 1]
            rest = [f"set_priority={code_of(args['set_priority'])}"] if "set_priority" in args else []
            function = code_of(node.func)
        if prefix + "MATH" not in chosen:
            chosen.append(prefix + "MATH")
        text = f"{function}([{', '.join(chosen)}]{''.join(', ' + r for r in rest)})"
        self.changed("PL132", original, f"{name}(...) -> torch.nn.attention.sdpa_kernel([..., SDPBackend.MATH])",
                     needs_runtime=False)
        return self._parse(text)

    # -- building the call --------------------------------------------------------------------------

    def _sdpa(self, arguments: list[str], after: str, original: cst.Call) -> cst.BaseExpression:
        text = self._sdpa_text(arguments, after, "")
        return self._parse(text)

    def _parse(self, text: str) -> cst.BaseExpression:
        """`text` as an expression, with `{torch}` the module's name for torch (and no other field)."""
        return self.expression(text.replace("{", "{{").replace("}", "}}").replace("{{torch}}", "{torch}"))

    @staticmethod
    def _sdpa_text(arguments: list[str], after: str, indent: str) -> str:
        """One argument group a line (inputs, mask, options); `indent` is relative to the statement's
        block (libcst indents continuation lines under it)."""
        inputs, *rest = arguments
        lines = [inputs]
        if rest and rest[0].startswith("attn_mask="):
            lines.append(rest.pop(0))
        if rest:
            lines.append(", ".join(rest))
        body = "".join(f"\n{indent}    {line}," for line in lines)
        return f"{{torch}}.nn.functional.scaled_dot_product_attention({body}\n{indent}){after}"


def _head(node: cst.BaseExpression) -> str | None:
    """`a` in `a.b.c`."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _bind(node: cst.Call, parameters: tuple[str, ...], keyword_only: tuple[str, ...] = ()) -> dict:
    """Parameter name -> the argument's expression, as Python would bind the call."""
    bound: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(node.args):
        if arg.star:
            raise Unsupported("arguments unpacked with * or ** cannot be matched to parameters")
        if arg.keyword is None:
            if position >= len(parameters):
                raise Unsupported("more positional arguments than the known signature has")
            bound[parameters[position]] = arg.value
        elif arg.keyword.value in parameters or arg.keyword.value in keyword_only:
            bound[arg.keyword.value] = arg.value
        else:
            raise Unsupported(f"unknown argument {arg.keyword.value}=")
    return bound


def _window(node: cst.BaseExpression | None) -> tuple[int, int]:
    """(left, right) of a `window_size` written as a literal pair; -1 means unbounded."""
    if node is None:
        return -1, -1
    if isinstance(node, (cst.Tuple, cst.List)) and len(node.elements) == 2:
        values = [_int_literal(element.value) for element in node.elements]
        if None not in values:
            return values[0], values[1]
    raise Unsupported(f"window_size={code_of(node)} is not a literal pair of ints")


def _int_literal(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
            node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def _bool_literal(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _pure(node: cst.BaseExpression, what: str) -> str:
    """`node`'s code, when evaluating it twice is evaluating it once (a name, an attribute, an index)."""
    if _is_pure(node):
        return code_of(node)
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
    code = code_of(node)
    atomic = isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) or node.lpar
    return code if atomic else f"({code})"


def _grouped(expression: str) -> str:
    return f"({expression})" if " " in expression else expression


def _plus(offset: str, value: int) -> str:
    if not offset:
        return str(value)
    if value == 0:
        return offset
    return f"{offset} {'+' if value > 0 else '-'} {abs(value)}"
