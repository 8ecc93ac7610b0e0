"""A short tour of the portlayer runtime: the same lines run on cuda, npu, musa, xpu, mlu, mps or cpu."""

import torch

import portlayer

print(
    f"backend        {portlayer.backend().name} (collective {portlayer.dist_backend()}, "
    f"devices via {portlayer.visible_devices_env()})"
)
device = portlayer.device()
print(f"device         {device}  ({portlayer.get_device_name()})")

portlayer.manual_seed_all(0)
x = torch.randn(512, 512, device=device)

start, end = portlayer.Event(enable_timing=True), portlayer.Event(enable_timing=True)
start.record()
with portlayer.autocast(dtype=torch.bfloat16):
    y = x @ x
end.record()
portlayer.synchronize()
print(f"autocast       matmul ran in {y.dtype}, {start.elapsed_time(end):.2f} ms")

scaler = portlayer.GradScaler(enabled=portlayer.device_type() != "cpu")
print(f"GradScaler     enabled={scaler.is_enabled()}")
print(f"memory         allocated {portlayer.memory_allocated()} B, peak {portlayer.max_memory_allocated()} B")
print(f"DDP            device_ids={portlayer.ddp_device_ids(device)}")
