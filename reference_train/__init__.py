"""The reference DDP HuggingFace trainer and its parity run files.

    torchrun --nproc_per_node 2 -m portlayer.train --preset gpt2-tiny --steps 30 --parity --out run.json

See docs/reference-train.md. Importing this package stays cheap: torch, transformers and datasets load in
the modules that need them.
"""
