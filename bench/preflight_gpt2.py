"""Preflight of a full-size gpt2 training step on the cpu, against the same step unrecorded.

    python bench/preflight_gpt2.py [--seq-len 128] [--batch-size 1]

Full width and depth (124M parameters), a shortened sequence: which ops a step dispatches does not depend
on its length. Prints the preflight time and its ratio to the plain step measured in the same run.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from portlayer.train import presets  # noqa: E402

from portlayer import preflight  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1)
    args = parser.parse_args()

    preset = presets.get_preset("gpt2")
    model = presets.build_model(preset, parity=False)
    ids = torch.randint(0, model.config.vocab_size, (args.batch_size, args.seq_len),
                        generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids}

    def fresh_optimizer():
        return torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay)

    def plain_step():
        optimizer = fresh_optimizer()
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), preset.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()

    plain_step()  # warm-up: first-call allocations and lazy initialisation
    start = time.perf_counter()
    plain_step()
    anchor = time.perf_counter() - start

    start = time.perf_counter()
    report = preflight.check(model, batch, fresh_optimizer(), "npu", clip_grad_norm=preset.max_grad_norm)
    recorded = time.perf_counter() - start

    calls = sum(checked.use.count for checked in report.ops)
    parameters = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"gpt2 ({parameters:.0f}M parameters), batch {args.batch_size} x seq {args.seq_len}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"  {report.verdict()}; {len(report.ops)} ops, {calls} calls")
    print(f"training step, unrecorded (anchor): {anchor:.2f} s")
    print(f"preflight (record + check):         {recorded:.2f} s  ratio {recorded / anchor:.2f}x")


if __name__ == "__main__":
    main()
