"""The drop-in behind `import portlayer.torch as torch` (`portlayer/torch.py` stays the entry point):

- `retarget`: `Retarget`, which rewrites a CUDA device or collective name for the active backend;
- `torch_names`: the torch callables and types `portlayer.torch` holds instead of torch's own;
- `cuda_module`: `portlayer.torch.cuda`, torch.cuda's names answering for the active backend;
- `patches`: the explicit, reversible process-wide patches (`portlayer.patch()` / `unpatch()`).

What the runtime does where a backend lacks a concept is not here but in `portlayer/stand_ins.py`.
"""
