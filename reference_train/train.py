"""The training loop: DDP (or a sharded strategy, `portlayer.strategies`) through portlayer, AdamW with a warm-up + cosine schedule, parity records.

Every device-related call goes through portlayer (device, collective backend, RNG, sync, autocast,
memory), so the same loop runs on cuda, npu, musa, xpu, … and the cpu.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import portlayer
from portlayer import strategies
from portlayer.errors import PortlayerError, print_error, write_line
from portlayer.progress import terminal_bar
from portlayer.strategies.layout import ONE_F_ONE_B, Layout
from portlayer.strategies.parallel import Parallel, Setup
from portlayer.train import checkpoint, data, runfile
from portlayer.train.batches import MicroBatches
from portlayer.train.presets import (
    DROPOUT_FIELD,
    Preset,
    build_config,
    build_model,
    functional_dropout_off,
    read_override_file,
)
from portlayer.train.progress import STEP_EVENTS_ENV, step_event
from portlayer.train.step_records import StepWindow

STARTUP_TIMEOUT = timedelta(minutes=30)
# Config keys that describe the software or the checkpoint, not the experiment.
_VOLATILE_CONFIG_KEYS = ("transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype")


@dataclass
class Options:
    preset: Preset
    steps: int
    per_device_batch: int
    # How many steps the learning-rate schedule spans: part of the experiment, so that `steps` may stop a
    # run early and the shorter run is a prefix of the longer one. None: the preset's length, or `steps`
    # where that is longer.
    schedule_steps: int | None = None
    grad_accum: int = 1
    seq_len: int = 64
    lr: float = 1e-3
    warmup_steps: int = 5
    seed: int = 0
    precision: str = "fp32"
    strategy: str = strategies.DEFAULT
    tensor_parallel: int = 1  # --tp: ranks that split each layer (Megatron's --tensor-model-parallel-size)
    sequence_parallel: bool = False  # --sp: the sequence split over the --tp ranks outside the split matmuls
    pipeline_parallel: int = 1  # --pp: stages of consecutive blocks (Megatron's --pipeline-model-parallel-size)
    pipeline_schedule: str = ONE_F_ONE_B
    tf32: bool = False
    compile: bool = False  # torch.compile the model (parity runs stay eager unless asked)
    parity: bool = False
    keep_dropout: bool = False
    perturb_init: int = 0  # seed of the one-ulp moves of the initial weights; 0: none
    override_config: Path | None = None
    model_name_or_path: str | None = None
    trust_remote_code: bool = False
    data: Path | None = None
    out: Path | None = None
    checkpoint_dir: Path | None = None
    save_every: int = 0
    resume: bool = False
    timeout_s: float = 600.0
    log_every: int = 10
    quiet: bool = False
    fault: tuple[str, int, int] | None = None  # (kind, step, rank): for tests of failure handling
    command: list[str] = field(default_factory=list)

    @property
    def schedule(self) -> int:
        return self.schedule_steps or max(self.preset.default_steps, self.steps)

    @property
    def layout(self) -> Layout:
        return Layout(self.tensor_parallel, self.pipeline_parallel, self.sequence_parallel, self.pipeline_schedule)


@dataclass
class World:
    rank: int
    local_rank: int
    size: int
    distributed: bool
    layout: Layout = Layout()  # how the ranks split the model (--tp, --sp, --pp) and the data
    # Training collectives use these groups, whose timeout is `--timeout`; start-up and checkpoints, which
    # may wait on slow ranks legitimately, use the default group and its generous timeout.
    group: Any = None  # every rank
    data_group: Any = None  # the ranks that hold the same part of the model: gradients are averaged over them
    tensor_group: Any = None  # the ranks that split each layer of a stage between them (with --tp)
    pipeline_group: Any = None  # the stages of one copy of the model, in order (with --pp)

    @classmethod
    def from_env(cls) -> World:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        return cls(
            rank=int(os.environ.get("RANK", "0")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            size=size,
            distributed="RANK" in os.environ,
        )

    @property
    def data_rank(self) -> int:
        """Which copy of the model this rank helps train: the data it reads (every rank of a copy reads the same)."""
        return self.layout.coordinates(self.rank, self.size).copy

    @property
    def data_size(self) -> int:
        return self.layout.data_parallel(self.size)

    def all_reduce(self, values: list[float], op=None) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64)
        if self.distributed:
            # The collective runs on the device its backend serves (gloo: cpu; nccl, hccl, …: the device).
            tensor = tensor.to(
                portlayer.device(self.local_rank) if portlayer.backend().is_accelerator else "cpu"
            )
            dist.all_reduce(tensor, op=op or dist.ReduceOp.SUM, group=self.group)
        return tensor.cpu().tolist()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


def sha256_tensors(tensors) -> str:
    digest = hashlib.sha256()
    for name, tensor in tensors:
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def config_hash(config, options: Options) -> str:
    """What makes two runs the same model: the preset and its architecture.

    Dropout-like fields, the batch split, the precision and the optimiser settings stay out: a run that
    differs only there is the same experiment done differently, which is exactly what a parity check must
    be able to compare (and report as diverged). The data and the initial weights have checksums of their own.
    """
    experiment = {
        "preset": options.preset.name,
        "task": options.preset.task,
        "config": _architecture(config.to_dict()),
    }
    return hashlib.sha256(json.dumps(experiment, sort_keys=True, default=str).encode()).hexdigest()


def _architecture(config: dict) -> dict:
    return {
        key: _architecture(value) if isinstance(value, dict) else value
        for key, value in config.items()
        if key not in _VOLATILE_CONFIG_KEYS and not DROPOUT_FIELD.search(str(key))
    }


def data_checksum(blocks: data.Blocks, order: data.Order, samples: int) -> str:
    """sha256 of the training token ids the run consumes, in run order (before masked-LM masking)."""
    digest = hashlib.sha256()
    chunk = 4096
    for first in range(0, samples, chunk):
        rows = order.blocks_at(torch.arange(first, min(first + chunk, samples)))
        digest.update(blocks.train[rows].numpy().tobytes())
    return digest.hexdigest()


def vendor_info() -> dict:
    backend = portlayer.backend()
    module = backend.vendor_module
    if module is None:
        return {"module": None, "version": None}
    return {"module": module, "version": getattr(sys.modules.get(module), "__version__", None)}


def host_peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def set_tf32(on: bool) -> None:
    torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


class Logger:
    """Rank-0 output: a progress bar on a terminal, a line every `log_every` steps, nothing when quiet."""

    def __init__(self, world: World, options: Options, first_step: int):
        self.active = world.rank == 0 and not options.quiet
        self.every = options.log_every
        # Under `portlayer parity run` the launcher draws the bar from one line per step (progress.py).
        self.step_events = self.active and bool(os.environ.get(STEP_EVENTS_ENV))
        self.bar = terminal_bar(
            enabled=self.active, total=options.steps, initial=first_step - 1, desc=options.preset.name, unit="step"
        )
        # How often the loop reads its steps from the device (step_records.py): every step where a bar or the
        # launcher follows each one, else every `log_every` steps. Every rank reads at the same steps (a read is
        # a collective), so they agree on it once, here.
        (follows_each_step,) = world.all_reduce([float(self.bar is not None or self.step_events)],
                                                op=dist.ReduceOp.MAX)  # fmt: skip
        self.read_every = 1 if follows_each_step else options.log_every

    def wants(self, step: int) -> bool:
        """Whether the loop reads its steps at step `step` (besides the first, the last and checkpoints)."""
        return bool(self.read_every) and step % self.read_every == 0

    def info(self, message: str) -> None:
        if not self.active:
            return
        if self.bar is not None:
            self.bar.write(message)
        else:
            write_line(message)

    def step(self, record: dict, steps: int) -> None:
        if self.step_events:
            write_line(step_event(record["step"], record["loss"]))
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{record['loss']:.4f}")
        if self.every and (record["step"] % self.every == 0 or record["step"] == steps):
            norm = record["grad_norm"]
            self.info(
                f"step {record['step']}/{steps}  loss {record['loss']:.6f}  lr {record['lr']:.3e}  "
                f"grad norm {'-' if norm is None else f'{norm:.4f}'}  {record['tokens_per_s']:,.0f} tok/s"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def inject_fault(options: Options, world: World, step: int) -> None:
    """`--fault KIND@STEP:RANK`: make one rank die or hang at a step, to test that the job ends cleanly."""
    if options.fault is None:
        return
    kind, at_step, at_rank = options.fault
    if step != at_step or world.rank != at_rank:
        return
    if kind == "exit":
        print_error(f"rank {world.rank}: injected fault: exiting at step {step}")
        os._exit(1)  # like a kill: no cleanup, no goodbye to the other ranks
    time.sleep(3600)  # "hang": the others must time out in their next collective


@dataclass
class TrainingStep:
    """One optimizer step of the job, the part of the loop that is timed: `grad_accum` micro-batches
    forward and backward (gradients reduced on the last), then clip, optimizer and schedule, as the
    strategy does them (`portlayer.strategies.parallel`)."""

    options: Options
    world: World
    device: torch.device
    parallel: Parallel
    blocks: data.Blocks
    order: data.Order
    batches: MicroBatches

    @classmethod
    def build(cls, options: Options, world: World, device: torch.device, model, blocks, order) -> TrainingStep:
        """`model` (bare) prepared under the run's strategy, with AdamW and a warm-up + cosine schedule."""
        from transformers import get_cosine_schedule_with_warmup

        setup = Setup(
            group=world.data_group if world.distributed else None,
            tensor_group=world.tensor_group,
            pipeline_group=world.pipeline_group,
            layout=world.layout,
            device=device,
            make_optimizer=lambda parameters: torch.optim.AdamW(
                parameters,
                lr=options.lr,
                weight_decay=options.preset.weight_decay,
                **optimizer_implementation(options.parity),
            ),
            make_scheduler=lambda optimizer: get_cosine_schedule_with_warmup(
                optimizer, options.warmup_steps, options.schedule
            ),
            micro_batch=options.per_device_batch,
            seq_len=options.seq_len,
            grad_accum=options.grad_accum,
            max_grad_norm=options.preset.max_grad_norm,
            precision=options.precision,
        )
        parallel = strategies.prepare(strategies.get_strategy(options.strategy), model, setup)
        batches = MicroBatches(
            blocks, order, micro=options.per_device_batch, rank=world.data_rank, world_size=world.data_size,
            seed=options.seed, device=device, total=options.steps * options.grad_accum,
        )  # fmt: skip
        return cls(options, world, device, parallel, blocks, order, batches)

    @property
    def model(self) -> torch.nn.Module:
        """What the loop calls: the strategy's wrapper (DDP, the DeepSpeed engine) or the sharded model."""
        return self.parallel.model

    @property
    def scheduler(self):
        return self.parallel.scheduler

    def __call__(self, step: int) -> tuple[torch.Tensor, int, torch.Tensor | float]:
        """Queue optimizer step `step` (from 1) on the device: this rank's loss of each micro-batch (on the device,
        unread), its tokens, and the total gradient norm before clipping (the same on every rank)."""
        options, parallel = self.options, self.parallel
        tokens = 0

        def micro_batches():
            nonlocal tokens
            for accum_index in range(options.grad_accum):
                index = (step - 1) * options.grad_accum + accum_index
                batch = self.batches.get(index)
                tokens += batch.tokens
                yield batch.tensors
                self.batches.stage(index + 1)  # built and copied while the device runs this micro-batch

        losses = parallel.forward_backward(micro_batches())
        grad_norm = parallel.step()
        return torch.stack(losses), tokens, grad_norm


def optimizer_implementation(parity: bool) -> dict:
    """AdamW's implementation. In parity mode, torch's default for the device: the one the committed baselines
    trained with. Otherwise the fastest the backend has: fused kernels (one launch per step), or else foreach
    (one launch per group of tensors, where the default may loop over them one by one)."""
    if parity:
        return {}
    return {"fused": True} if portlayer.backend().fused_optimizers else {"foreach": True}


def optimizer_name(parity: bool) -> str:
    """The optimizer as the run file records it: "AdamW", "AdamW (fused)" or "AdamW (foreach)"."""
    implementation = next(iter(optimizer_implementation(parity)), None)
    return f"AdamW ({implementation})" if implementation else "AdamW"


def train(options: Options) -> dict | None:
    """Run the training job of this process (one rank); returns the run record on rank 0."""
    world = World.from_env()
    layout = options.layout  # checked before anything starts: a one-line refusal
    layout.data_parallel(world.size)
    layout.check_training(options.strategy, options.compile, options.grad_accum)
    layout.check_sequence(options.seq_len)
    world.layout = layout
    if options.parity:
        # Before the first kernel and before the collective starts: some switches are read at start-up.
        portlayer.set_deterministic(True)
    set_tf32(options.tf32)
    device = portlayer.device(world.local_rank)
    if portlayer.backend().is_accelerator:
        portlayer.set_device(world.local_rank)
    if world.distributed:
        dist.init_process_group(portlayer.dist_backend(), timeout=STARTUP_TIMEOUT)
    try:
        with (
            functional_dropout_off()
            if options.parity and not options.keep_dropout
            else contextlib.nullcontext()
        ):
            result = _train(options, world, device)
        if world.distributed:
            # Before the groups go. torch 2.6's gloo frees a finished collective's tensors on its worker thread,
            # which needs the GIL for that while it holds the lock that freeing the group takes with the GIL
            # held: a rank hung at exit about one run in three (mixtral-8x7b-tiny, 30 steps). While this rank
            # waits here, without the GIL, the worker finishes.
            dist.barrier(group=world.group)
        return result
    except RuntimeError as exc:
        if world.distributed and "timed out" in str(exc).lower():
            raise PortlayerError(
                f"a collective timed out after {options.timeout_s:g} s: another rank is stuck or gone"
            ) from exc
        raise
    finally:
        if world.distributed:
            dist.destroy_process_group()


def _train(options: Options, world: World, device: torch.device) -> dict | None:
    """The job, step by step: model, data, the strategy's wrapper and optimizer (resumed if asked), the loop,
    evaluation, and on rank 0 the run record."""
    core, zeroed, init_checksum = _build_model(options, device)
    blocks = data.load_blocks(options.preset.task, options.seq_len, options.data)
    _check_vocabulary(core, blocks)
    _start_training_group(world, options)
    order = data.Order(len(blocks.train), options.seed)
    training = TrainingStep.build(options, world, device, core, blocks, order)
    model = training.model
    experiment = config_hash(core.config, options)
    records, start, resumed_from = _resume(options, world, training, experiment)

    log = Logger(world, options, start)
    if resumed_from is not None:
        log.info(f"resumed from {resumed_from} at step {start}")
    model.train()
    window = StepWindow(world, device, options.grad_accum)
    for step in range(start, options.steps + 1):
        inject_fault(options, world, step)
        lr = training.scheduler.get_last_lr()[0]
        began = time.perf_counter()
        window.add(began, step, lr, *training(step))
        saving = bool(options.checkpoint_dir and options.save_every and step % options.save_every == 0)
        # The first step alone: it pays for warm-up (allocations, kernel selection, compilation).
        if saving or step in (start, options.steps) or log.wants(step):
            for record in window.read():
                records.append(record)
                log.step(record, options.steps)
        if saving:
            _save_checkpoint(options, world, training, records, step, experiment)
    log.close()

    eval_loss = evaluate(training.parallel, blocks, world, device, options)
    (host_peak,) = world.all_reduce([host_peak_rss_bytes()], op=dist.ReduceOp.MAX)
    if world.rank != 0:
        return None
    identity = {
        "config_hash": experiment,
        "data_checksum": data_checksum(blocks, order, options.steps * _global_batch(options, world)),
        "init_weights_checksum": init_checksum,
        "dropout_fields_zeroed": zeroed,
    }
    run = _run_record(options, world, device, records, identity, eval_loss, host_peak, training.parallel.engine)
    log.info(
        f"{options.preset.name}: loss {records[0]['loss']:.4f} -> {records[-1]['loss']:.4f} in {options.steps}"
        f" steps, eval loss {eval_loss:.4f} (perplexity {run['summary']['perplexity']:.2f}), "
        f"{run['summary']['tokens_per_s']:,.0f} tok/s"
    )
    if options.out:
        runfile.write_run(options.out, run)
        log.info(f"wrote {options.out}")
    return run


def _build_model(options: Options, device: torch.device) -> tuple[torch.nn.Module, list[str], str]:
    """The preset's model with its config overrides, initialised on the cpu from the seed and moved to the
    device; with the dropout fields parity zeroed and the checksum of the initial weights."""
    overrides = read_override_file(options.override_config) if options.override_config else None
    config, zeroed = build_config(
        options.preset,
        parity=options.parity and not options.keep_dropout,
        config_overrides=overrides,
        model_name_or_path=options.model_name_or_path,
        trust_remote_code=options.trust_remote_code,
        override_source=f"--override-config {options.override_config}",
    )
    model = build_model(
        options.preset,
        seed=options.seed,
        parity=options.parity,
        model_name_or_path=options.model_name_or_path,
        trust_remote_code=options.trust_remote_code,
        config=config,
    )
    init_checksum = sha256_tensors(model.state_dict().items())
    if options.perturb_init:
        perturb_by_one_ulp(model, options.perturb_init)  # after the checksum: the same experiment, rounded apart
    model.to(device)
    if options.compile:
        compile_in_place(model)
    return model, zeroed, init_checksum


def compile_traces_transformers() -> bool:
    """Whether dynamo can trace transformers' forward on this torch: transformers' masks ask
    `torch.compiler.is_exporting`, which torch 2.7 added."""
    return hasattr(torch.compiler, "is_exporting")


def compile_in_place(model: torch.nn.Module) -> None:
    """`--compile`: torch.compile the model in place, so that the module and its state dict keep their names and
    checkpoints and strategies see no wrapper. transformers warns (once, but calls its logger at every step) from
    inside the forward of a model whose class names no loss, GPT-2's "`loss_type=None` was set …": dynamo is told
    to leave that call out, which would otherwise break the step into two graphs."""
    import torch._dynamo
    from transformers.utils import logging as hf_logging

    if not compile_traces_transformers():
        raise PortlayerError(
            f"--compile needs torch >= 2.7: transformers calls torch.compiler.is_exporting, which torch "
            f"{torch.__version__} lacks (train without --compile)"
        )
    # Where dynamo has the switch (2.11 has, 2.8 has not); without it the step compiles as two graphs.
    if (ignored := getattr(torch._dynamo.config, "ignore_logging_functions", None)) is not None:
        ignored.add(hf_logging.warning_once)
    model.compile()


@torch.no_grad()
def perturb_by_one_ulp(model: torch.nn.Module, seed: int) -> None:
    """Move every floating-point parameter element to its next float up or down, the direction drawn from
    `seed`: two correct implementations of one training differ by rounding of about this size."""
    generator = torch.Generator().manual_seed(seed)
    for parameter in model.parameters():
        if not parameter.is_floating_point():
            continue
        up = torch.randint(0, 2, parameter.shape, generator=generator, dtype=torch.bool)
        toward = torch.where(up, math.inf, -math.inf).to(parameter.dtype)
        parameter.copy_(torch.nextafter(parameter, toward))


def _start_training_group(world: World, options: Options) -> None:
    """The process group of training collectives, whose timeout is `--timeout` (when distributed)."""
    if not world.distributed:
        return
    world.barrier()  # every rank is ready: from here on a silent rank is a failure
    timeout = timedelta(seconds=options.timeout_s)
    world.group = world.data_group = dist.new_group(timeout=timeout)
    if world.layout.splits:
        groups = world.layout.groups(world.size)
        world.data_group, _ = dist.new_subgroups_by_enumeration(groups.data, timeout=timeout)
        if world.layout.tensor > 1:
            world.tensor_group, _ = dist.new_subgroups_by_enumeration(groups.tensor, timeout=timeout)
        if world.layout.pipeline > 1:
            world.pipeline_group, _ = dist.new_subgroups_by_enumeration(groups.pipeline, timeout=timeout)


def _check_vocabulary(core, blocks: data.Blocks) -> None:
    vocab = core.config.vocab_size
    if len(blocks.tokenizer) > vocab:
        raise PortlayerError(
            f"the tokenizer has {len(blocks.tokenizer)} tokens but the model's vocabulary {vocab}"
        )


def _resume(options: Options, world: World, training: TrainingStep, experiment: str):
    """(records so far, the first step to run, the checkpoint resumed from or None)."""
    resume_from = (
        checkpoint.latest(options.checkpoint_dir) if options.resume and options.checkpoint_dir else None
    )
    if resume_from is None:
        return [], 1, None
    state = checkpoint.load(resume_from, world.rank)
    saved = (state["config_hash"], state["world_size"], Layout(**state.get("layout", {"tensor": state.get("tensor_parallel", 1)})))
    if saved != (experiment, world.size, world.layout):
        raise PortlayerError(f"{resume_from}: saved by a different experiment, world size or layout; not resuming")
    saved_strategy = state.get("strategy", strategies.DEFAULT)
    if saved_strategy != options.strategy:
        raise PortlayerError(
            f"{resume_from}: saved under --strategy {saved_strategy}; resume with it, not {options.strategy}"
        )
    training.parallel.load(resume_from)
    return state["records"], state["step"] + 1, resume_from


def _save_checkpoint(
    options: Options, world: World, training: TrainingStep, records: list, step: int, experiment: str
) -> None:
    state = {
        "records": records,
        "step": step,
        "config_hash": experiment,
        "world_size": world.size,
        "layout": asdict(world.layout),
        "strategy": options.strategy,
    }
    checkpoint.save(options.checkpoint_dir, step, world.rank, state, world.barrier, training.parallel.save)


def _global_batch(options: Options, world: World) -> int:
    return options.per_device_batch * world.data_size * options.grad_accum


def _run_record(
    options: Options,
    world: World,
    device: torch.device,
    records: list[dict],
    identity: dict,
    eval_loss: float,
    host_peak: float,
    engine: str,
) -> dict:
    """The run file's content (runfile.py); `identity` holds the experiment's hash and checksums."""
    return {
        "schema": runfile.SCHEMA,
        "preset": options.preset.name,
        "metadata": {
            "backend": portlayer.backend().name,
            "device_type": portlayer.device_type(),
            "device_name": portlayer.get_device_name(device),
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "vendor": vendor_info(),
            "world_size": world.size,
            "tensor_parallel": world.layout.tensor,
            "sequence_parallel": world.layout.sequence,
            "pipeline_parallel": world.layout.pipeline,
            "pipeline_schedule": world.layout.schedule if world.layout.pipeline > 1 else None,
            "per_device_batch": options.per_device_batch,
            "grad_accum": options.grad_accum,
            "global_batch": _global_batch(options, world),
            "seq_len": options.seq_len,
            "steps": options.steps,
            "schedule_steps": options.schedule,
            "lr": options.lr,
            "warmup_steps": options.warmup_steps,
            "precision": options.precision,
            "strategy": options.strategy,
            "strategy_engine": engine,
            "tf32": options.tf32,
            "compile": options.compile,
            "optimizer": optimizer_name(options.parity),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "seed": options.seed,
            "parity": options.parity,
            "perturb_init": options.perturb_init,
            **identity,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": options.command,
            "model_name_or_path": options.model_name_or_path,
            "data": str(options.data) if options.data else None,
        },
        "steps": [{k: v for k, v in r.items() if k != "seconds"} for r in records],
        "summary": _summary(records, eval_loss, host_peak),
    }


def _summary(records: list[dict], eval_loss: float, host_peak: float) -> dict:
    timed = records[1:] or records  # the first step pays for warm-up (allocations, kernel selection)
    peaks = [r["peak_memory_bytes"] for r in records if r["peak_memory_bytes"] is not None]
    return {
        "tokens_per_s": sum(r["tokens_per_s"] * r["seconds"] for r in timed) / sum(r["seconds"] for r in timed),
        # None on the cpu, which has no device allocator; host_peak_rss_bytes stands in there.
        "peak_memory_bytes": max(peaks) if peaks else None,
        "eval_loss": eval_loss,
        "perplexity": math.exp(eval_loss) if eval_loss < 700 else math.inf,
        # The most resident memory of any rank's process.
        "host_peak_rss_bytes": int(host_peak),
    }


def evaluate(parallel: Parallel, blocks: data.Blocks, world: World, device: torch.device, options: Options) -> float:
    """Mean loss over the held-out blocks, each copy of the model taking every data-parallel-size-th batch, weighted
    by tokens (the ranks that split a copy count its batches alike, which leaves the mean as it is; a pipeline's
    stages before the last count none)."""
    parallel.model.eval()
    loss_sum, weight = 0.0, 0
    size = options.per_device_batch
    for index, first in enumerate(range(0, len(blocks.eval), size)):
        if index % world.data_size != world.data_rank:
            continue
        batch = {k: v.to(device) for k, v in data.eval_batch(blocks, first, size, options.seed).items()}
        loss = parallel.evaluation_loss(batch)
        if loss is None:
            continue
        # Causal LMs predict every token but the first; masked LMs the masked ones.
        targets = (
            int((batch["labels"][:, 1:] != -100).sum())
            if blocks.task == "causal-lm"
            else int((batch["labels"] != -100).sum())
        )
        loss_sum += loss.float().item() * targets
        weight += targets
    parallel.model.train()
    total, total_weight = world.all_reduce([loss_sum, weight])
    return total / max(total_weight, 1)
