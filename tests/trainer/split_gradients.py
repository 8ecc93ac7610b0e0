"""Run by torchrun on 2 ranks (tests/trainer/test_split_gradients.py): one step of each tiny preset cut into 2
pipeline stages (1F1B, 2 micro-batches), and of the models tensor parallel splits, split over the 2 ranks with the
sequence split between them (--tp 2 --sp). Every rank compares its losses, its gradients (a split layer's gathered
whole) and the clipping norm with those of the whole model doing the same step in this process; rank 0 prints one
JSON line, [{layout: {preset: the largest gradient difference}} of each rank]."""

import copy
import json

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from portlayer.strategies import get_strategy, prepare
from portlayer.strategies.layout import Layout
from portlayer.strategies.parallel import Setup
from portlayer.train.presets import build_model, get_preset
from tests.trainer.helpers import TINY_PRESETS

MICRO, SEQUENCE = 2, 16
PIPELINE, SEQUENCE_PARALLEL = Layout(pipeline=2), Layout(tensor=2, sequence=True)
LAYOUTS = {"--pp 2": (PIPELINE, TINY_PRESETS), "--tp 2 --sp": (SEQUENCE_PARALLEL, TINY_PRESETS[1:])}  # not GPT-2's Conv1D


def batches() -> list[dict[str, torch.Tensor]]:
    input_ids = torch.randint(0, 100, (2 * MICRO, SEQUENCE), generator=torch.Generator().manual_seed(1))
    labels = input_ids.clone()
    labels[:, ::3] = -100  # some tokens unlabelled, as masked LM's are
    return [{"input_ids": ids, "labels": label, "attention_mask": torch.ones_like(ids)}
            for ids, label in zip(input_ids.split(MICRO), labels.split(MICRO))]  # fmt: skip


def split_step(core, layout: Layout, pair) -> tuple[list[torch.Tensor], torch.Tensor]:
    setup = Setup(
        group=dist.new_group([dist.get_rank()]), device=torch.device("cpu"),
        make_optimizer=lambda parameters: torch.optim.SGD(parameters, lr=0.0),
        make_scheduler=lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        micro_batch=MICRO, grad_accum=2, max_grad_norm=1e9, seq_len=SEQUENCE, layout=layout,
        pipeline_group=pair if layout.pipeline > 1 else None, tensor_group=pair if layout.tensor > 1 else None,
    )  # fmt: skip
    parallel = prepare(get_strategy("ddp"), core, setup)
    losses = parallel.forward_backward(batches())
    return losses, parallel.clip_gradients()


def whole_step(whole) -> tuple[list[torch.Tensor], torch.Tensor]:
    losses = []
    for batch in batches():
        loss = whole(**batch).loss
        (loss / 2).backward()
        losses.append(loss.detach())
    return losses, torch.nn.utils.clip_grad_norm_(whole.parameters(), 1e9)


dist.init_process_group("gloo")
pair = dist.new_group([0, 1])
worst = {}
for name, (layout, presets) in LAYOUTS.items():
    for preset in presets:
        core = build_model(get_preset(preset), seed=0, parity=True)
        whole = copy.deepcopy(core)
        # A stage's block list is renumbered and a split layer's parameters are DTensors: name them first.
        name_of = {id(module): name for name, module in core.named_modules()}
        losses, norm = split_step(core, layout, pair)
        whole_losses, whole_norm = whole_step(whole)
        if layout.pipeline == 1 or dist.get_rank() == 1:  # a pipeline's last stage computes the loss
            torch.testing.assert_close(torch.stack(losses), torch.stack(whole_losses), rtol=1e-6, atol=0)
        torch.testing.assert_close(norm, whole_norm, rtol=1e-6, atol=0)
        expected = dict(whole.named_parameters(remove_duplicate=False))  # a tied head named as well
        differences = []
        for module in core.modules():
            for local, parameter in module.named_parameters(recurse=False):
                grad = parameter.grad.full_tensor() if isinstance(parameter.grad, DTensor) else parameter.grad
                differences.append((grad - expected[f"{name_of[id(module)]}.{local}".lstrip(".")].grad).abs().max())
        worst.setdefault(name, {})[preset] = max(differences).item()
# One line, from rank 0: the ranks share the pipe, and two printing at once may run their lines together.
every_rank = [None] * dist.get_world_size()
dist.all_gather_object(every_rank, worst)
if dist.get_rank() == 0:
    print(json.dumps(every_rank))
dist.destroy_process_group()
