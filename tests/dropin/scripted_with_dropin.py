"""Code written against the drop-in, compiled with TorchScript by test_dropin_cpu."""

import portlayer.torch as torch


def add_zeros(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(3, device=x.device) + x.to(torch.device("cpu"))
