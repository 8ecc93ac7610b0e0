"""A CUDA program in the shape of Megatron-LM's mixed-precision optimizer setup (megatron/core/optimizer/
optimizer.py, distrib_optimizer.py): parameters sorted by their legacy CUDA type string into half-precision
ones, which get an fp32 main copy, and fp32 ones; any other type is refused. Written for these tests.

Run, it prints one JSON object: how the parameters of a small model, placed on the accelerator, were sorted.
"""

import json

import torch


def sort_parameters(params):
    float16, fp32, main = [], [], []
    for param in params:
        if param.type() in ["torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"]:
            float16.append(param)
            main.append(param.detach().clone().float())
        elif param.type() == "torch.cuda.FloatTensor":
            fp32.append(param)
        else:
            raise TypeError(f"Wrapped parameters must be one of torch.cuda.FloatTensor, torch.cuda.HalfTensor, "
                            f"or torch.cuda.BFloat16Tensor. Received {param.type()}")
    return float16, fp32, main


def main() -> dict:
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)).to(device)
    model[0].to(torch.bfloat16)
    try:
        float16, fp32, main = sort_parameters(model.parameters())
    except TypeError as refused:
        return {"device": str(device), "refused": str(refused)}
    return {
        "device": str(next(model.parameters()).device),
        "float16": [str(p.dtype) for p in float16],
        "fp32": [str(p.dtype) for p in fp32],
        "main": [f"{p.dtype} {p.device.type}" for p in main],
    }


if __name__ == "__main__":
    print(json.dumps(main()))
