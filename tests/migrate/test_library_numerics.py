"""The library rows' rewrites compute what the library documents: each test migrates a line that uses the
library, runs the migrated line, and compares its numbers with a plain reference written from the
library's source (cited as repo@commit:path#lines), or with the library itself where it runs on the cpu
(bitsandbytes). Forward outputs, gradients and several optimizer steps, on random inputs.

Tolerances are the fp32 round-off measured between two orders of the same sums (`ROUND_OFF`), not
guesses: a different formula (no bias correction, L2 decay instead of decoupled, another eps) misses
them by orders of magnitude, which each trap's test shows.
"""

from __future__ import annotations

import pytest
import torch

from portlayer.migrate.engine import migrate_source

# Sources (full commits; abbreviated in the citations below): NVIDIA/apex@6424da3b4faa6c8f062da4a48c424fff3f02d42d,
# linkedin/Liger-Kernel@ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c,
# bitsandbytes-foundation/bitsandbytes@95f9af309d4d5793847169c39288dcd3fcbdf564.
STEPS = 5
# Measured (the optimizer, norm and loss cases below, this cpu): the largest gap between the migrated torch
# code in fp32 and the float64 references was 2.4e-7 absolute, a few fp32 ulps of values near 1, using 8%
# of this tolerance; each trap's effect is above 1e-4 (test_fused_adam_traps_are_real, the eps test).
ROUND_OFF = dict(rtol=1e-5, atol=1e-6)


def run_migrated(source: str, **names):
    """Migrate `source` (one module) to plain torch, run it with `names` bound, return its namespace."""
    result = migrate_source(source, "torch")
    assert "apex" not in result.code and "liger" not in result.code and "bitsandbytes" not in result.code, result.code
    namespace = dict(names)
    exec(compile(result.code, "<migrated>", "exec"), namespace)
    return namespace


def parameters(seed: int, dtype=torch.float32) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator).to(dtype)) for shape in ((7, 5), (5,), (3, 2, 4))]


def gradients(params, step: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(p.shape, generator=generator).to(p.dtype) for p in params]


def optimize(optimizer, params) -> list[torch.Tensor]:
    for step in range(STEPS):
        for p, g in zip(params, gradients(params, step)):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


# -- apex FusedAdam ----------------------------------------------------------------------------------

def apex_adam(params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, adam_w_mode=True,
              weight_decay=0.0):
    """FusedAdam's update, element by element, in float64: defaults from
    NVIDIA/apex@6424da3b:apex/optimizers/fused_adam.py#L68-L81, the update from csrc/multi_tensor_adam.cu#L78-L95
    (mode 0 adds the decay to the gradient, mode 1 to the update), bias correction #L118-L122."""
    beta1, beta2 = betas
    weights = [p.detach().double().clone() for p in params]
    m = [torch.zeros_like(w) for w in weights]
    v = [torch.zeros_like(w) for w in weights]
    for step in range(1, STEPS + 1):
        c1 = 1 - beta1 ** step if bias_correction else 1.0
        c2 = 1 - beta2 ** step if bias_correction else 1.0
        for w, m_, v_, g in zip(weights, m, v, gradients(params, step - 1)):
            g = g.double()
            if not adam_w_mode:
                g = g + weight_decay * w
            m_.mul_(beta1).add_((1 - beta1) * g)
            v_.mul_(beta2).add_((1 - beta2) * g * g)
            update = (m_ / c1) / ((v_ / c2).sqrt() + eps)
            if adam_w_mode:
                update = update + weight_decay * w
            w.sub_(lr * update)
    return [w.float() for w in weights]


def assert_steps_match(optimizer, params, expected):
    torch.testing.assert_close(optimize(optimizer, params), expected, **ROUND_OFF)


@pytest.mark.parametrize("call, reference", [
    ("FusedAdam(params, lr=1e-2)", {"lr": 1e-2}),
    ("FusedAdam(params, lr=1e-2, weight_decay=0.1, betas=(0.8, 0.9), eps=1e-6)",
     {"lr": 1e-2, "weight_decay": 0.1, "betas": (0.8, 0.9), "eps": 1e-6}),
    ("FusedAdam(params, 1e-2, True, (0.9, 0.99), 1e-8, False, 0.1)",
     {"lr": 1e-2, "betas": (0.9, 0.99), "adam_w_mode": False, "weight_decay": 0.1}),
])
def test_fused_adam_steps_match_apex(call, reference):
    params = parameters(0)
    namespace = run_migrated(f"from apex.optimizers import FusedAdam\noptimizer = {call}\n", params=params)
    assert_steps_match(namespace["optimizer"], params, apex_adam(parameters(0), **reference))


def test_fused_adam_traps_are_real():
    """What the rewrite guards against moves the weights far beyond round-off: AdamW's own default
    weight_decay (0.01, apex's is 0), L2 decay for decoupled, and dropping bias correction."""
    expected = apex_adam(parameters(0), lr=1e-2, weight_decay=0.1)
    for wrong in (apex_adam(parameters(0), lr=1e-2, weight_decay=0.1, adam_w_mode=False),
                  apex_adam(parameters(0), lr=1e-2, weight_decay=0.1, bias_correction=False)):
        assert max((a - b).abs().max().item() for a, b in zip(wrong, expected)) > 1e-4
    params = parameters(0)
    default_decay = optimize(torch.optim.AdamW(params, lr=1e-2), params)
    assert max((a - b).abs().max().item() for a, b in zip(default_decay, apex_adam(parameters(0), lr=1e-2))) > 1e-6


@pytest.mark.parametrize("argument", ["bias_correction=False", "amsgrad=True", "capturable=True"])
def test_fused_adam_without_torch_equivalent_is_left_and_reported(argument):
    source = f"from apex.optimizers import FusedAdam\noptimizer = FusedAdam(params, {argument})\n"
    result = migrate_source(source, "torch")
    assert result.code == source
    assert "PL213" in [d.code for d in result.diagnostics]


def test_fused_adam_grads_and_moments():
    """set_grad_none=True (apex's default) frees grads as torch's zero_grad does; moments are fp32 for
    fp32 parameters, as apex keeps them (fused_adam.py#L205-L210); for bf16 parameters torch keeps them in
    bf16 (the documented difference)."""
    params = parameters(0)
    optimizer = run_migrated("from apex.optimizers import FusedAdam\noptimizer = FusedAdam(params)\n",
                             params=params)["optimizer"]
    optimize(optimizer, params)
    optimizer.zero_grad()
    assert all(p.grad is None for p in params)
    assert {optimizer.state[p]["exp_avg"].dtype for p in params} == {torch.float32}
    half = parameters(0, torch.bfloat16)
    optimizer = run_migrated("from apex.optimizers import FusedAdam\noptimizer = FusedAdam(params)\n",
                             params=half)["optimizer"]
    optimize(optimizer, half)
    assert {optimizer.state[p]["exp_avg"].dtype for p in half} == {torch.bfloat16}


# -- apex FusedSGD -----------------------------------------------------------------------------------

def apex_sgd(params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """FusedSGD's update (NVIDIA/apex@6424da3b:csrc/multi_tensor_sgd_kernel.cu#L82-L102, wd_after_momentum=False): decay
    added to the gradient, the momentum buffer starts as the first gradient."""
    weights = [p.detach().double().clone() for p in params]
    buffers: list[torch.Tensor | None] = [None] * len(weights)
    for step in range(STEPS):
        for i, (w, g) in enumerate(zip(weights, gradients(params, step))):
            g = g.double() + weight_decay * w
            if momentum:
                buffers[i] = g.clone() if buffers[i] is None else buffers[i] * momentum + (1 - dampening) * g
                g = g + momentum * buffers[i] if nesterov else buffers[i]
            w.sub_(lr * g)
    return [w.float() for w in weights]


@pytest.mark.parametrize("call, reference", [
    ("FusedSGD(params, lr=0.1)", {"lr": 0.1}),
    ("FusedSGD(params, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2)",
     {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 1e-2}),
    ("FusedSGD(params, 0.05, 0.9, 0, 1e-3, True)",
     {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "nesterov": True}),
])
def test_fused_sgd_steps_match_apex(call, reference):
    params = parameters(1)
    namespace = run_migrated(f"from apex.optimizers import FusedSGD\noptimizer = {call}\n", params=params)
    assert_steps_match(namespace["optimizer"], params, apex_sgd(parameters(1), **reference))


# -- apex norms, LigerRMSNorm ------------------------------------------------------------------------

def layer_norm(x, shape, weight, bias, eps):
    dims = tuple(range(-len(shape), 0))
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    return y if weight is None else y * weight + bias


def rms_norm(x, shape, weight, eps):
    """apex's manual_rms_norm (NVIDIA/apex@6424da3b:apex/normalization/fused_layer_norm.py#L22-L35, what FusedRMSNorm runs
    off CUDA, #L929-L936), the same as liger's llama casting mode on fp32 (linkedin/Liger-Kernel@ead96b61:src/liger_kernel/ops/
    rms_norm.py#L97-L130): x / sqrt(mean(x^2) + eps) * weight."""
    dims = tuple(range(-len(shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y if weight is None else y * weight


@pytest.mark.parametrize("import_line, call, shape, eps, affine, kind", [
    ("from apex.normalization import FusedLayerNorm", "FusedLayerNorm(16, eps=1e-6)", (16,), 1e-6, True, "ln"),
    ("from apex.normalization import FusedLayerNorm", "FusedLayerNorm([4, 16], elementwise_affine=False)", (4, 16),
     1e-5, False, "ln"),
    ("from apex.normalization import MixedFusedLayerNorm", "MixedFusedLayerNorm(16)", (16,), 1e-5, True, "ln"),
    ("from apex.normalization import FusedRMSNorm", "FusedRMSNorm(16)", (16,), 1e-5, True, "rms"),
    ("from apex.normalization import FusedRMSNorm", "FusedRMSNorm(16, 1e-3, False, True)", (16,), 1e-3, False, "rms"),
    ("from liger_kernel.transformers import LigerRMSNorm", "LigerRMSNorm(16)", (16,), 1e-6, True, "rms"),
])
def test_norm_rewrite_forward_and_gradients(import_line, call, shape, eps, affine, kind):
    """Defaults from NVIDIA/apex@6424da3b:apex/normalization/fused_layer_norm.py#L784-L790 and #L901-L907 (eps 1e-5;
    nn.RMSNorm's own default is the dtype's epsilon) and linkedin/Liger-Kernel@ead96b61:src/liger_kernel/transformers/
    rms_norm.py#L7-L17 (eps 1e-6). Random affine parameters, small-variance input, where eps shows."""
    module = run_migrated(f"{import_line}\nnorm = {call}\n")["norm"]
    generator = torch.Generator().manual_seed(2)
    if affine:
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
    assert (len(list(module.parameters())) > 0) == affine
    x = (1e-2 * torch.randn((3, 5, *shape), generator=generator)).requires_grad_()
    weight = None if not affine else module.weight.detach().clone().requires_grad_()
    bias = None if not affine or kind == "rms" else module.bias.detach().clone().requires_grad_()
    expected = layer_norm(x, shape, weight, bias, eps) if kind == "ln" else rms_norm(x, shape, weight, eps)
    actual = module(x)
    torch.testing.assert_close(actual, expected, **ROUND_OFF)
    upstream = torch.randn(actual.shape, generator=generator)
    expected_grads = torch.autograd.grad(expected, [t for t in (x, weight, bias) if t is not None], upstream)
    actual_grads = torch.autograd.grad(actual, [x, *module.parameters()], upstream)
    for got, want in zip(actual_grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_rms_norm_eps_trap_is_real():
    x = 1e-3 * torch.randn(4, 16, generator=torch.Generator().manual_seed(3))
    default = torch.nn.RMSNorm(16)(x)
    assert (default - rms_norm(x, (16,), torch.ones(16), 1e-5)).abs().max() > 1e-2


# -- liger losses ------------------------------------------------------------------------------------

def liger_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Liger's loss (linkedin/Liger-Kernel@ead96b61:src/liger_kernel/ops/cross_entropy.py#L146-L204): per row, (1 - e) * -log p_y
    + e / V * sum_i -log p_i; rows whose target is ignore_index count zero; mean divides by the rows not
    ignored."""
    losses = []
    for row, y in zip(logits.double(), target.tolist()):
        if y == ignore_index:
            losses.append(row.sum() * 0)
            continue
        log_p = row - torch.logsumexp(row, 0)
        losses.append((1 - label_smoothing) * -log_p[y] + label_smoothing / row.numel() * -log_p.sum())
    losses = torch.stack(losses)
    kept = (target != ignore_index).sum()
    total = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / kept}[reduction]
    return total.float()


LOSSES = [
    ("", {}),
    ("ignore_index=3, label_smoothing=0.1", {"ignore_index": 3, "label_smoothing": 0.1}),
    ("reduction='sum', label_smoothing=0.2", {"reduction": "sum", "label_smoothing": 0.2}),
    ("reduction='none'", {"reduction": "none"}),
]


def logits_and_targets(seed: int, rows=12, vocab=9):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=generator)
    target = torch.randint(0, vocab, (rows,), generator=generator)
    target[::4] = 3  # some rows hit ignore_index=3 where it is set
    return logits, target


@pytest.mark.parametrize("arguments, reference", LOSSES)
def test_liger_cross_entropy_rewrite(arguments, reference):
    loss_fn = run_migrated("from liger_kernel.transformers import LigerCrossEntropyLoss\n"
                           f"loss_fn = LigerCrossEntropyLoss({arguments})\n")["loss_fn"]
    logits, target = logits_and_targets(4)
    logits.requires_grad_()
    actual, expected = loss_fn(logits, target), liger_cross_entropy(logits, target, **reference)
    torch.testing.assert_close(actual, expected, **ROUND_OFF)
    upstream = torch.ones_like(actual)
    torch.testing.assert_close(torch.autograd.grad(actual, logits, upstream)[0],
                               torch.autograd.grad(expected, logits, upstream)[0], **ROUND_OFF)


@pytest.mark.parametrize("arguments, reference", LOSSES[:3])
def test_liger_fused_linear_cross_entropy_rewrite(arguments, reference):
    """Called as liger's module is (linkedin/Liger-Kernel@ead96b61:src/liger_kernel/transformers/fused_linear_cross_entropy.py#L46):
    (lin_weight, _input, target, bias=None), the loss of _input @ lin_weight.T + bias."""
    loss_fn = run_migrated("from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss\n"
                           f"loss_fn = LigerFusedLinearCrossEntropyLoss({arguments})\n")["loss_fn"]
    generator = torch.Generator().manual_seed(5)
    hidden = torch.randn(12, 6, generator=generator, requires_grad=True)
    weight = torch.randn(9, 6, generator=generator, requires_grad=True)
    bias = torch.randn(9, generator=generator, requires_grad=True)
    _, target = logits_and_targets(5)
    actual = loss_fn(weight, hidden, target, bias)
    expected = liger_cross_entropy(hidden @ weight.T + bias, target, **reference)
    torch.testing.assert_close(actual, expected, **ROUND_OFF)
    for got, want in zip(torch.autograd.grad(actual, (hidden, weight, bias)),
                         torch.autograd.grad(expected, (hidden, weight, bias))):
        torch.testing.assert_close(got, want, **ROUND_OFF)


# -- amp_C.multi_tensor_l2norm -----------------------------------------------------------------------

@pytest.mark.parametrize("per_tensor", [False, True])
def test_multi_tensor_l2norm_rewrite(per_tensor):
    """apex returns the total L2 norm as a 1-element fp32 tensor and, with per_tensor, each tensor's
    (NVIDIA/apex@6424da3b:csrc/multi_tensor_l2norm_kernel.cu#L290-L334)."""
    tensors = [t.detach() for t in parameters(6)]
    namespace = run_migrated(
        "import amp_C\nfrom apex.multi_tensor_apply import multi_tensor_applier\n"
        f"norm, each = multi_tensor_applier(amp_C.multi_tensor_l2norm, buf, [tensors], {per_tensor})\n",
        tensors=tensors, buf=torch.zeros(1, dtype=torch.int))
    total = torch.sqrt(sum((t.double() ** 2).sum() for t in tensors)).float().reshape(1)
    assert namespace["norm"].shape == (1,) and namespace["norm"].dtype == torch.float32
    torch.testing.assert_close(namespace["norm"], total, **ROUND_OFF)
    if per_tensor:
        torch.testing.assert_close(namespace["each"], torch.stack([t.double().norm() for t in tensors]).float(),
                                   **ROUND_OFF)


# -- apex SyncBatchNorm ------------------------------------------------------------------------------

def test_convert_syncbn_model_rewrite_keeps_the_batch_norms_state():
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 1), torch.nn.BatchNorm2d(4))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 2, 5, 5, generator=torch.Generator().manual_seed(7))
    expected = model.eval()(x)
    converted = run_migrated("from apex.parallel import convert_syncbn_model\nmodel = convert_syncbn_model(model)\n",
                             model=model)["model"]
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)
    torch.testing.assert_close(converted.eval()(x), expected, **ROUND_OFF)


# -- bitsandbytes, against the library itself (its cpu backend) ---------------------------------------

# bitsandbytes is a dev dependency (pyproject [dev]): `make venv` installs it, so these always run.
import bitsandbytes as bnb  # noqa: E402


@pytest.mark.parametrize("name, arguments", [
    ("AdamW", "lr=1e-2, weight_decay=0.1"),
    ("AdamW32bit", "lr=1e-2, betas=(0.8, 0.95)"),
    ("Adam", "lr=1e-2, weight_decay=0.01"),
])
def test_bitsandbytes_32bit_optimizers_match_the_library(name, arguments):
    """bitsandbytes-foundation/bitsandbytes@95f9af30:bitsandbytes/optim/adamw.py#L9-L22, adam.py#L9-L22: the 32-bit optimizers' steps, run by
    bitsandbytes itself on the cpu, against the migrated torch optimizer."""
    params = parameters(8)
    migrated = run_migrated(f"import bitsandbytes as bnb\noptimizer = bnb.optim.{name}(params, {arguments})\n",
                            params=params)["optimizer"]
    library_params = parameters(8)
    library = eval(f"bnb.optim.{name}(library_params, {arguments})")
    torch.testing.assert_close(optimize(migrated, params), optimize(library, library_params), **ROUND_OFF)


def test_bitsandbytes_8bit_state_is_what_the_warning_says():
    """AdamW8bit (adamw.py#L62-L75) quantises both moments of a tensor with at least min_8bit_size=4096
    elements to one byte each; torch's AdamW keeps them in fp32: about 4x the state (PL216)."""
    shape = (128, 128)
    param = torch.nn.Parameter(torch.randn(shape))
    library = bnb.optim.AdamW8bit([param], lr=1e-3)
    param.grad = torch.randn(shape)
    library.step()
    library_bytes = sum(t.numel() * t.element_size() for t in library.state[param].values()
                        if torch.is_tensor(t) and t.numel() > 1)
    torch_param = torch.nn.Parameter(param.detach().clone())
    migrated = run_migrated("import bitsandbytes as bnb\noptimizer = bnb.optim.AdamW8bit(params, lr=1e-3)\n",
                            params=[torch_param])["optimizer"]
    torch_param.grad = torch.randn(shape)
    migrated.step()
    torch_bytes = sum(t.numel() * t.element_size() for t in migrated.state[torch_param].values() if t.numel() > 1)
    assert torch_bytes == 8 * param.numel()
    assert 3.5 < torch_bytes / library_bytes <= 4.0
