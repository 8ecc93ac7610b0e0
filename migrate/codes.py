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
                  "`torch.cuda.FloatTensor(...)` to `torch.tensor`/`torch.empty` with dtype and device; "
                  "`x.type() == \"torch.cuda.FloatTensor\"` (or `in` a list of them) to a test of `x.dtype` and "
                  "of the device (`portlayer.is_accelerator(x)`)"),
    "PL107": Code("environment", "change", "environment variable renamed",
                  "`CUDA_VISIBLE_DEVICES` / `NCCL_*` to the vendor's own variable"),
    "PL108": Code("flags", "change", "cuDNN flag converted",
                  "`torch.backends.cudnn.X` to the vendor's equivalent (musa: `torch.backends.mudnn.X`)"),
    "PL109": Code("profiling", "change", "NVTX range converted",
                  "`torch.cuda.nvtx.range(...)` to the device-generic `torch.profiler.record_function(...)`; "
                  "`range_push`/`range_pop`/`range_start`/`range_end`/`mark` to `portlayer.nvtx`'s (neutral)"),
    "PL110": Code("imports", "change", "import added",
                  "`import portlayer`, `import torch` or the vendor plugin (`import torch_npu`), once; reported at "
                  "the first conversion that needed it"),
    "PL111": Code("distributed", "change", "DeepSpeed's \"nccl\" dropped",
                  "`deepspeed.init_distributed(dist_backend=\"nccl\")`: without it DeepSpeed takes its accelerator's "
                  "backend (hccl on npu, gloo or ccl on the cpu)"),
    "PL112": Code("distributed", "change", "FSDP device_id converted",
                  "`FullyShardedDataParallel(device_id=torch.cuda.current_device())` or a provable int index to the "
                  "target's device (FSDP makes an int the accelerator's device, which a host without one lacks)"),
    "PL113": Code("config", "change", "accelerate config distributed_type converted",
                  "`distributed_type: MULTI_GPU` to the vendor's (`MULTI_NPU`, `MULTI_MUSA`), as `accelerate config` "
                  "writes it on that vendor's host"),
    "PL120": Code("library", "change", "CUDA-only import removed: the program's own fallback runs",
                  "`try: import <library> … except ImportError: <fallback>` becomes the fallback, what runs "
                  "without the library; its calls are left to the program, not rewritten"),
    "PL121": Code("library", "change", "apex optimizer converted to torch.optim",
                  "`FusedAdam` to `torch.optim.AdamW` (adam_w_mode=False: `Adam`) with apex's weight_decay=0.0, "
                  "`FusedSGD` to `torch.optim.SGD`"),
    "PL122": Code("library", "change", "fused norm converted to torch.nn",
                  "apex `FusedLayerNorm`/`MixedFusedLayerNorm` to `nn.LayerNorm`, `FusedRMSNorm`/`LigerRMSNorm` "
                  "to `nn.RMSNorm` with the library's eps"),
    "PL123": Code("library", "change", "apex.parallel converted to torch",
                  "`apex.parallel.DistributedDataParallel` to torch's, `convert_syncbn_model` to "
                  "`nn.SyncBatchNorm.convert_sync_batchnorm`"),
    "PL124": Code("library", "change", "amp_C.multi_tensor_l2norm converted",
                  "`multi_tensor_applier(amp_C.multi_tensor_l2norm, buf, [ts], per_tensor)` to "
                  "`torch.nn.utils.get_total_norm(ts)` (and `torch._foreach_norm(ts)` per tensor)"),
    "PL125": Code("library", "change", "bitsandbytes optimizer converted to torch.optim",
                  "`bnb.optim.AdamW*`/`Adam*` to `torch.optim.AdamW`/`Adam`"),
    "PL126": Code("library", "change", "liger loss converted to torch",
                  "`LigerCrossEntropyLoss` to `nn.CrossEntropyLoss`; `LigerFusedLinearCrossEntropyLoss` to "
                  "`F.cross_entropy(F.linear(...))` with its call signature"),
    "PL127": Code("library", "change", "liger kernel patch dropped",
                  "`apply_liger_kernel_to_*(...)` as a statement: the model keeps its stock torch layers"),
    "PL130": Code("attention", "change", "flash-attn call converted to scaled_dot_product_attention",
                  "`flash_attn_func`, `flash_attn_qkvpacked_func`, `flash_attn_kvpacked_func` and "
                  "`flash_attn_varlen_func` (one SDPA per packed sequence) to "
                  "`torch.nn.functional.scaled_dot_product_attention`, layout, bottom-right causal mask, "
                  "window, GQA and scale kept"),
    "PL131": Code("attention", "change", "xformers memory_efficient_attention converted to scaled_dot_product_attention",
                  "no bias or `LowerTriangularMask()` (top-left causal: `is_causal=True`); `p` and `scale` kept"),
    "PL132": Code("attention", "change", "SDPA kernel choice made portable",
                  "`torch.backends.cuda.sdp_kernel(...)` / `sdpa_kernel(SDPBackend.FLASH_ATTENTION)` to "
                  "`torch.nn.attention.sdpa_kernel([..., SDPBackend.MATH])`: the chosen kernels first, and the "
                  "math kernel every device has"),
    # PL2xx: CUDA-only libraries.
    "PL201": Code("library", "warning", "apex is CUDA-only",
                  "use `torch.amp` (portlayer.autocast/GradScaler), torch's fused optimizers and "
                  "DistributedDataParallel"),
    "PL202": Code("library", "warning", "flash_attn is CUDA-only",
                  "its calls are rewritten to `torch.nn.functional.scaled_dot_product_attention` where exact "
                  "(PL130); for the rest use SDPA (attn_implementation=\"sdpa\") or the vendor's fused attention"),
    "PL203": Code("library", "warning", "xformers is CUDA-only",
                  "`memory_efficient_attention` is rewritten to `torch.nn.functional.scaled_dot_product_attention` "
                  "where exact (PL131); use SDPA for the rest"),
    "PL204": Code("library", "warning", "bitsandbytes is CUDA-only",
                  "use torch optimizers, or the vendor's quantisation support"),
    "PL205": Code("library", "warning", "triton kernels need a Triton backend for the target",
                  "keep the kernel's torch version (the eager ops it fuses; `torch.compile` fuses them again where "
                  "the backend has a compiler), or use the vendor's Triton backend where one exists "
                  "(triton-ascend for Ascend NPUs)"),
    "PL206": Code("library", "warning", "transformer_engine is CUDA-only",
                  "te.Linear -> torch.nn.Linear, te.LayerNorm -> torch.nn.LayerNorm, te.RMSNorm -> torch.nn.RMSNorm, "
                  "te.DotProductAttention -> torch.nn.functional.scaled_dot_product_attention, te.fp8_autocast -> "
                  "`portlayer.autocast` with bfloat16 (FP8 recipes have no portable form)"),
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
    "PL213": Code("library", "warning", "apex call has no exact torch equivalent: left as is",
                  "FusedLAMB/NovoGrad: keep apex on CUDA or choose a torch optimizer knowingly (the update "
                  "differs); a flag torch lacks (bias_correction=False, wd_after_momentum, gradient_average=False"
                  "): drop it or keep apex"),
    "PL214": Code("library", "info", "zero_grad() frees grads where apex zeroed them",
                  "call `optimizer.zero_grad(set_to_none=False)` where the program reads `.grad` after it"),
    "PL215": Code("library", "warning", "apex.amp has no one-call torch equivalent",
                  "O1: run the forward under `torch.autocast(device_type, dtype=torch.float16)` and "
                  "`scaler = torch.amp.GradScaler(device_type)`; `scaler.scale(loss).backward()`, "
                  "`scaler.step(optimizer)`, `scaler.update()`. O2 (fp16 model, fp32 master weights): keep the "
                  "model in fp32 and use autocast, which gives the same fp32 master weights"),
    "PL216": Code("library", "warning", "optimizer state no longer 8-bit: it grows about 4x",
                  "budget 8 bytes per parameter for Adam's moments (was about 2), or keep bitsandbytes where it "
                  "has a backend for the target"),
    "PL217": Code("library", "info", "liger kernel patch skipped: no Triton backend is assumed for the target",
                  "the model runs its stock torch layers; re-add the patch where the target ships Triton"),
    "PL218": Code("library", "info", "mixed-dtype norm: torch needs input and parameters of one dtype",
                  "run it under autocast, or cast the input to the parameters' dtype"),
    "PL219": Code("library", "warning", "library call has no exact torch equivalent: left as is",
                  "the message names the argument; drop it knowingly or keep the library"),
    "PL220": Code("library", "warning", "amp_C overflow buffer no longer written",
                  "where the program reads the buffer, test `torch.isfinite(norm)` instead"),
    "PL221": Code("library", "info", "fused linear cross-entropy now materialises the logits",
                  "more memory for a large vocabulary; chunk the sequence if it does not fit"),
    "PL230": Code("attention", "warning", "flash-attn call left as is: no exact scaled_dot_product_attention form",
                  "return_attn_probs, alibi_slopes and softcap have none in SDPA (ALiBi and softcap: a float "
                  "`attn_mask` you build); otherwise write the argument out (a literal window_size pair) or "
                  "assign the tensor to a name, and migrate again"),
    "PL231": Code("attention", "warning", "xformers memory_efficient_attention left as is",
                  "for `BlockDiagonalMask` (packed sequences) call `torch.nn.functional.scaled_dot_product_attention` "
                  "once per sequence, or pass a block-diagonal boolean `attn_mask`; a tensor bias is SDPA's float "
                  "`attn_mask`"),
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
                  "find the vendor's equivalent, or guard the call with `portlayer.device_type() == \"cuda\"`; "
                  "for the names training code reaches most (allocator pools, raw streams, NVML telemetry, the "
                  "generator plumbing on targets other than neutral) the printed hint names the way"),
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
                  "use `torch.tensor(data, dtype=..., device=...)` or `torch.empty(size, dtype=..., device=...)`; "
                  "a type test (`isinstance(x, torch.cuda.FloatTensor)`, `f(x).type() == ...`) is "
                  "`x.dtype == torch.float32 and portlayer.is_accelerator(x)`, which the codemod writes for "
                  "`x.type() == \"torch.cuda.FloatTensor\"` with `x` a name"),
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
    "PL413": Code("api", "info", "DeepSpeed's get_accelerator() is already portable: left as is",
                  "it follows the accelerator DeepSpeed finds (or one given with `set_accelerator`)"),
    "PL414": Code("distributed", "warning", "FSDP device_id not provably a device index",
                  "give the target's device (neutral: `portlayer.device(i)`); FSDP makes an int the accelerator's "
                  "device, which a host without one lacks"),
    "PL415": Code("library", "warning", "DeepSpeed has no accelerator for the target",
                  "DeepSpeed's accelerators are cuda, cpu, xpu, npu, mps, hpu, mlu, sdaa, supa, klxpu: give it one with "
                  "`deepspeed.accelerator.set_accelerator(...)` before `deepspeed.initialize`, or migrate with "
                  "`--target neutral`"),
    "PL416": Code("amp", "warning", "torch.cuda import of a name the program also imports from elsewhere: left as is",
                  "the program picks the module itself (its own backend test), and where the test does not pick "
                  "the target the CUDA one is used: add a branch for the target, or import the name once"),
    "PL417": Code("environment", "warning", "nvidia-smi run from Python",
                  "ask the runtime (`portlayer.device_count()`, `portlayer.get_device_name()`) or run the vendor's "
                  "tool (npu-smi, mthreads-gmi), whose arguments and output differ"),
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
                  "a setting only CUDA reads (CUDA_DEVICE_MAX_CONNECTIONS, TORCH_NCCL_*) can be dropped or kept for "
                  "CUDA runs"),
    "PL608": Code("environment", "warning", "vendor variable takes different units",
                  "rename it by hand and convert its value (e.g. NCCL_BUFFSIZE bytes -> HCCL_BUFFSIZE MiB)"),
    "PL609": Code("launcher", "info", "deepspeed launcher left as is: it counts the accelerator DeepSpeed finds",
                  "`--include`/`--exclude` indices, `--num_gpus` and `--num_nodes` go through DeepSpeed's accelerator, "
                  "which sets its own visible-devices variable (npu: ASCEND_RT_VISIBLE_DEVICES)"),
    "PL610": Code("launcher", "warning", "deepspeed launcher on a device DeepSpeed has no accelerator for",
                  "launch with `torchrun --nproc_per_node N` (the program calls `deepspeed.init_distributed()` "
                  "under it) and give DeepSpeed an accelerator in the program"),
    "PL611": Code("config", "info", "accelerate config gpu_ids left as is: accelerate sets the accelerator's variable",
                  "accelerate launch turns `gpu_ids` into the visible-devices variable of the accelerator it finds "
                  "(ASCEND_RT_VISIBLE_DEVICES, MUSA_VISIBLE_DEVICES, ...)"),
    "PL612": Code("config", "warning", "accelerate config MULTI_GPU: on a host without an accelerator the processes train alone",
                  "MULTI_GPU launches one process per device on any accelerator accelerate finds; on the cpu each "
                  "process trains by itself unless the config says `distributed_type: MULTI_CPU` (keep one config "
                  "per kind of host)"),
    "PL613": Code("config", "warning", "accelerate config setting only CUDA has",
                  "fp8 needs Transformer Engine or MS-AMP (CUDA-only): use `bf16` on the target"),
    "PL614": Code("environment", "warning", "vendor variable does not take this value",
                  "keep the settings the vendor's allocator reads too (expandable_segments, max_split_size_mb, "
                  "garbage_collection_threshold, roundup_power2_divisions) and set its own variable"),
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
