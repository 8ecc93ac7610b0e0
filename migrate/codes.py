"""Every stable diagnostic and conversion code, in one table.

Codes never change meaning once released; `docs/migrate-codes.md` is generated from this table
(`python -m portlayer.migrate.codes > docs/migrate-codes.md`) and a test keeps the two in sync.

Ranges: PL1xx conversions made, PL2xx CUDA-only libraries, PL3xx cuDNN / CUDA backend flags,
PL4xx torch.cuda names or CUDA features the target lacks, PL5xx dtype risks, PL6xx environment
variables and shell scripts, PL9xx files that could not be processed.
"""

from __future__ import annotations

from typing import NamedTuple


class Code(NamedTuple):
    category: str
    severity: str  # "change" for PL1xx (a conversion made), else "error" | "warning" | "info"
    title: str
    hint: str


CODES: dict[str, Code] = {
    # PL1xx: conversions made (reported as changes, not diagnostics).
    "PL101": Code("device", "change", "CUDA device converted",
                  "`torch.device(\"cuda\", i)`, `\"cuda:0\"`, `.cuda()`, `.is_cuda` in device positions"),
    "PL102": Code("api", "change", "torch.cuda API converted",
                  "`torch.cuda.X` to `portlayer.X`, `torch.accelerator.X` or the vendor's module"),
    "PL103": Code("amp", "change", "automatic mixed precision converted",
                  "`torch.cuda.amp.*`, `torch.autocast(\"cuda\")`, `torch.amp.GradScaler(\"cuda\")`"),
    "PL104": Code("distributed", "change", "collective backend converted",
                  "`\"nccl\"` and `Backend.NCCL` where a process group backend is chosen"),
    "PL105": Code("distributed", "change", "DistributedDataParallel devices converted",
                  "`device_ids=[i]` to what the active backend needs; `output_device` dropped when it "
                  "repeats `device_ids` (DDP's default, and `None` is what cpu modules require)"),
    "PL106": Code("tensor-type", "change", "legacy CUDA tensor type converted",
                  "`torch.cuda.FloatTensor(...)` to `torch.tensor`/`torch.empty` with dtype and device"),
    "PL107": Code("environment", "change", "environment variable renamed",
                  "`CUDA_VISIBLE_DEVICES` / `NCCL_*` to the vendor's own variable"),
    "PL108": Code("flags", "change", "cuDNN flag converted",
                  "`torch.backends.cudnn.X` to the vendor's equivalent (musa: `torch.backends.mudnn.X`)"),
    "PL109": Code("profiling", "change", "NVTX range converted",
                  "`torch.cuda.nvtx.range(...)` to the device-generic `torch.profiler.record_function(...)`"),
    "PL110": Code("imports", "change", "import added",
                  "`import portlayer`, `import torch` or the vendor plugin (`import torch_npu`), once; reported at "
                  "the first conversion that needed it"),
    # PL2xx: CUDA-only libraries.
    "PL201": Code("library", "warning", "apex is CUDA-only",
                  "use `torch.amp` (portlayer.autocast/GradScaler), torch's fused optimizers and "
                  "DistributedDataParallel"),
    "PL202": Code("library", "warning", "flash_attn is CUDA-only",
                  "use `torch.nn.functional.scaled_dot_product_attention` (attn_implementation=\"sdpa\"), "
                  "or the vendor's fused attention"),
    "PL203": Code("library", "warning", "xformers is CUDA-only",
                  "use `torch.nn.functional.scaled_dot_product_attention`"),
    "PL204": Code("library", "warning", "bitsandbytes is CUDA-only",
                  "use torch optimizers, or the vendor's quantisation support"),
    "PL205": Code("library", "warning", "triton kernels need a Triton backend for the target",
                  "check the vendor ships a Triton backend, or keep a torch fallback"),
    "PL206": Code("library", "warning", "transformer_engine is CUDA-only",
                  "use torch.nn layers with `portlayer.autocast`"),
    "PL207": Code("library", "warning", "liger_kernel is CUDA-only (Triton kernels)",
                  "use the model's stock torch layers"),
    "PL208": Code("library", "warning", "cupy is CUDA-only",
                  "use torch tensors, or numpy on the host"),
    "PL209": Code("library", "warning", "pynvml queries NVIDIA's driver only",
                  "use `portlayer.mem_get_info()` / `get_device_properties()` or the vendor's SMI tool"),
    "PL210": Code("library", "warning", "pycuda is CUDA-only",
                  "use torch tensors and the device module's streams"),
    "PL211": Code("library", "warning", "nvidia_resiliency_ext is CUDA-only",
                  "use torchrun's elastic restarts (`--max-restarts`) and `torch.distributed.checkpoint`, or "
                  "the vendor's own fault-tolerance tooling"),
    "PL212": Code("library", "warning", "package of CUDA kernels",
                  "keep a torch fallback for the target (the model's stock layers), or the vendor's port of "
                  "the package"),
    # PL3xx: cuDNN and CUDA backend flags.
    "PL301": Code("flags", "warning", "cudnn.deterministic makes only cuDNN deterministic",
                  "use `portlayer.set_deterministic(True)` (neutral) or "
                  "`torch.use_deterministic_algorithms(True)`"),
    "PL302": Code("flags", "info", "torch.backends.cudnn flag has no effect on the target",
                  "harmless off CUDA; remove it, or keep it for CUDA runs"),
    "PL303": Code("flags", "warning", "torch.backends.cuda flag has no effect on the target",
                  "for TF32 use `torch.set_float32_matmul_precision(...)`; SDPA picks kernels per backend"),
    # PL4xx: torch.cuda names or CUDA features the target lacks.
    "PL401": Code("api", "warning", "torch.cuda name has no equivalent on the target",
                  "find the vendor's equivalent, or guard the call with `portlayer.device_type() == \"cuda\"`"),
    "PL402": Code("api", "warning", "CUDA graphs are CUDA-only",
                  "guard with a backend check; the vendor may offer its own graph capture (torch.npu.graph)"),
    "PL403": Code("extension", "error", "custom CUDA extension",
                  "port the kernels to the vendor's toolchain, or provide a torch fallback"),
    "PL404": Code("extension", "error", "load_inline with cuda_sources",
                  "port the kernels to the vendor's toolchain, or provide a torch fallback"),
    "PL405": Code("device", "warning", "device or backend string not provably used as a device",
                  "use the target's device, device type or collective here, as the printed hint spells them "
                  "(neutral: `portlayer.device(i)`, `portlayer.device_type()`, `portlayer.dist_backend()`)"),
    "PL406": Code("tensor-type", "warning", "legacy CUDA tensor type cannot be converted safely",
                  "use `torch.tensor(data, dtype=..., device=...)` or `torch.empty(size, dtype=..., device=...)`"),
    "PL407": Code("distributed", "warning", "DDP output_device differs from device_ids",
                  "output_device must be None on cpu; drop it when it repeats device_ids[0]"),
    "PL408": Code("profiling", "warning", "profiler activity CUDA records CUDA kernels only",
                  "profile the target's kernels its own way (npu: `torch_npu.profiler.ProfilerActivity.NPU`, "
                  "xpu: `ProfilerActivity.XPU`); `ProfilerActivity.CPU` works everywhere"),
    "PL409": Code("api", "warning", "torch.version.cuda is None off CUDA",
                  "branch on `portlayer.device_type()` (torch: `torch.accelerator.current_accelerator().type`); "
                  "guard version parsing with `if torch.version.cuda:`"),
    "PL410": Code("distributed", "warning", "torch.cuda.nccl is NCCL-only",
                  "use torch.distributed collectives, whose backend the migration sets for the target"),
    # PL5xx: dtype risks.
    "PL411": Code("api", "info", "code already dispatches per backend: left as is",
                  "its CUDA branch runs only where its own test picks CUDA; add a branch for the target if "
                  "the chain lacks one"),
    "PL412": Code("device", "warning", "an int given as a device means a CUDA device",
                  "give the target's device for the index (neutral: `portlayer.device(i)`); where the value is "
                  "provably an int (`int(...)`, a parameter annotated `int`) the codemod converts it"),
    "PL501": Code("dtype", "warning", "float64 on a backend without native float64",
                  "use float32 on the device; keep float64 on the host (cpu) if needed"),
    "PL502": Code("dtype", "info", "float64 on some of the backends the code may run on has no native support",
                  "use float32 on the device where it runs on those backends; keep float64 on the host (cpu) "
                  "if needed"),
    # PL6xx: environment variables and shell scripts.
    "PL601": Code("environment", "warning", "CUDA_VISIBLE_DEVICES in a shell script",
                  "set the target's visible-devices variable (portlayer.visible_devices_env())"),
    "PL602": Code("environment", "warning", "NCCL_* variable in a shell script",
                  "set the collective's own variable (HCCL_*, MCCL_*)"),
    "PL603": Code("environment", "warning", "nvidia-smi in a shell script",
                  "use the vendor's tool (npu-smi, mthreads-gmi) or `portlayer doctor`"),
    "PL604": Code("environment", "info", "shell script left as is: the portlayer runtime translates its variables",
                  "the runtime carries CUDA_VISIBLE_DEVICES and the NCCL_* settings with a vendor equivalent over "
                  "to the active backend (README table); the other NCCL_* settings have no effect off CUDA"),
    "PL605": Code("environment", "warning", "NCCL_* variable with no vendor equivalent",
                  "find the collective's own setting in the vendor's documentation, or drop it"),
    "PL606": Code("environment", "info", "CUDA/NCCL variable left as is: the portlayer runtime translates it",
                  "portlayer sets the active backend's variable from it at start-up where one exists (README "
                  "table); an NCCL_* setting without a vendor equivalent has no effect off CUDA"),
    "PL607": Code("environment", "warning", "CUDA/NCCL variable has no device-generic form",
                  "set the accelerator's own variable (ASCEND_RT_VISIBLE_DEVICES, MUSA_VISIBLE_DEVICES, ...); "
                  "a setting only CUDA reads (PYTORCH_CUDA_ALLOC_CONF, TORCH_NCCL_*) can be dropped or kept for "
                  "CUDA runs"),
    "PL608": Code("environment", "warning", "vendor variable takes different units",
                  "rename it by hand and convert its value (e.g. NCCL_BUFFSIZE bytes -> HCCL_BUFFSIZE MiB)"),
    # PL9xx: processing errors.
    "PL901": Code("error", "error", "syntax error: file left untouched", "fix the syntax, or exclude the file"),
    "PL902": Code("error", "error", "decode error: file left untouched",
                  "declare the encoding (PEP 263) or convert the file to UTF-8"),
}


def markdown() -> str:
    """The codes table as Markdown: the body of docs/migrate-codes.md."""
    lines = [
        "# `portlayer migrate` codes",
        "",
        "Generated from `migrate/codes.py` by `python -m portlayer.migrate.codes > docs/migrate-codes.md`.",
        "PL1xx are conversions made; every other code is a diagnostic printed as",
        "`path:line:col: PLnnn message`, followed by its hint.",
        "",
        "| code | category | severity | meaning | hint |",
        "| --- | --- | --- | --- | --- |",
    ]
    for code, row in CODES.items():
        hint = row.hint.replace("|", "\\|")
        lines.append(f"| {code} | {row.category} | {row.severity} | {row.title} | {hint} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
