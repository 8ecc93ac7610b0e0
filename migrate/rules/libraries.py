"""CUDA-only libraries and extensions, reported where they are imported or built (nothing rewritten),
and a program's own fallback for a missing library taken.

A library is matched by the top-level package of an absolute import; `attn_implementation=
"flash_attention_2"` (transformers) counts as flash_attn. Custom CUDA extensions: `CUDAExtension`,
`load_inline(cuda_sources=...)`, `load(sources=[... ".cu" ...])`. `try: import apex … except ImportError:
<fallback>` becomes its fallback (`portlayer.migrate.engine.program_fallbacks` says why and how).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.codes import CODES
from portlayer.migrate.engine.context import EXCLUDED_LINES
from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.guards import OPTIONAL_IMPORTS
from portlayer.migrate.engine.program_fallbacks import FallbackChoice, find_fallbacks
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import FileRule, Rule, dotted
from portlayer.migrate.rules.strings import string_value

# Top-level package -> code.
LIBRARIES = {
    "apex": "PL201",
    "flash_attn": "PL202",
    "flash_attn_interface": "PL202",
    "xformers": "PL203",
    "bitsandbytes": "PL204",
    "triton": "PL205",
    "transformer_engine": "PL206",
    "liger_kernel": "PL207",
    "cupy": "PL208",
    "pynvml": "PL209",
    "pycuda": "PL210",
    # apex's own CUDA extensions, imported by the code that used apex (Megatron, NeMo, …).
    **dict.fromkeys(("amp_C", "apex_C", "fused_layer_norm_cuda", "fused_adam_cuda", "fused_dense_cuda",
                     "syncbn", "scaled_masked_softmax_cuda", "scaled_upper_triang_masked_softmax_cuda"), "PL201"),
    **dict.fromkeys(("GPUtil", "nvidia_smi", "nvitop"), "PL209"),
    "nvidia_resiliency_ext": "PL211",
    # Kernels for NVIDIA GPUs only, and NVIDIA's `nvidia.*` and `cuda` (cuda-python) packages.
    **dict.fromkeys(("mamba_ssm", "causal_conv1d", "selective_scan_cuda", "flashinfer", "deep_gemm",
                     "grouped_gemm", "tensorrt", "torch_tensorrt", "nvidia", "cuda", "cutlass"), "PL212"),
}
# Libraries whose `try: import … except ImportError: <fallback>` gives way to the fallback. Not triton:
# a vendor may ship a Triton backend (triton-ascend), where the program's Triton branch still runs.
FALLBACK_LIBRARIES = frozenset(LIBRARIES) - {"triton"}
FALLBACKS = Fact(
    "the program's own fallbacks for a missing CUDA-only library",
    lambda file, facts: () if file.packages.isdisjoint(FALLBACK_LIBRARIES)
    else tuple(find_fallbacks(file.tree, FALLBACK_LIBRARIES)))
# Those that give way: all but the ones the user excluded or a chain that already dispatches holds.
TAKEN_FALLBACKS = Fact(
    "the fallbacks taken",
    lambda file, facts: tuple(f for f in facts[FALLBACKS] if f.statement.lineno not in facts[EXCLUDED_LINES]))
_EXTENSION = {"torch.utils.cpp_extension.CUDAExtension"}
_LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
_LOAD = "torch.utils.cpp_extension.load"


class CudaOnlyLibraries(Rule):
    TRIGGER = Words(("flash_attention_2",), imported=tuple(LIBRARIES))
    NEEDS = (OPTIONAL_IMPORTS, TAKEN_FALLBACKS)

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            module = dotted(alias.name) or ""
            if not self._converted(node, [alias.evaluated_alias or module.split(".")[0]]):
                self._imported(alias.name, module)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not node.relative and node.module is not None and not isinstance(node.names, cst.ImportStar):
            if not self._converted(node, [alias.evaluated_alias or dotted(alias.name) for alias in node.names]):
                self._imported(node.module, dotted(node.module) or "")
        elif not node.relative and node.module is not None:
            self._imported(node.module, dotted(node.module) or "")
        return False

    def _converted(self, node: cst.CSTNode, names: list[str]) -> bool:
        """An import whose every name a rule converted every use of: it goes (`Requests.converted_names`)."""
        return all(name in self.requests.converted_names for name in names)

    def _imported(self, node: cst.CSTNode, module: str) -> None:
        code = LIBRARIES.get(module.split(".")[0])
        line = self.position(node)[0]
        if code is not None and not any(line in fallback.lines for fallback in self.fact(TAKEN_FALLBACKS)):
            optional = self.fact(OPTIONAL_IMPORTS).reasons.get(line)
            note = f" (optional here: {optional})" if optional else ""
            self.report(code, node, f"{module}: {CODES[code].title}{note}")

    def visit_Arg(self, node: cst.Arg) -> None:
        if (node.keyword is not None and node.keyword.value == "attn_implementation"
                and string_value(node.value) == "flash_attention_2"):
            self.report("PL202", node, "attn_implementation=\"flash_attention_2\" needs flash_attn (CUDA-only)")


class CudaExtensions(Rule):
    TRIGGER = Words(("cpp_extension",))  # every name the rule resolves is imported from it

    def visit_Call(self, node: cst.Call) -> None:
        name = self.qualified(node.func)
        keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        if name in _EXTENSION:
            self.report("PL403", node, "CUDAExtension builds CUDA kernels")
        elif name == _LOAD_INLINE and "cuda_sources" in keywords:
            self.report("PL404", node, "load_inline(cuda_sources=...) compiles CUDA kernels")
        elif name == _LOAD:
            sources = keywords.get("sources") or (node.args[1].value if len(node.args) > 1 else None)
            if sources is not None and any(
                (string_value(element.value) or "").endswith((".cu", ".cuh"))
                for element in getattr(sources, "elements", ())
            ):
                self.report("PL403", node, "cpp_extension.load(...) compiles .cu sources")


class ProgramFallbacks(FileRule):
    """Each fallback taken is a conversion (PL120); the `try` statements are replaced once every rule has
    run (`Requests.fallbacks`), with what the rules made of their `except` bodies."""

    NEEDS = (FALLBACKS, TAKEN_FALLBACKS)

    def check(self) -> None:
        taken = self.fact(TAKEN_FALLBACKS)
        if not taken:
            return
        for fallback in taken:
            statement = fallback.statement
            self.changed_at("PL120", statement.lineno, statement.col_offset + 1,
                            f"`try: import {fallback.module}` removed: the program's own fallback (its `except` "
                            "body) runs")
        self.requests.fallbacks = FallbackChoice(FALLBACK_LIBRARIES,
                                                 tuple(fallback in taken for fallback in self.fact(FALLBACKS)))
