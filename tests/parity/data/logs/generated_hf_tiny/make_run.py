"""How the files beside this one were made (not run by the tests): a 2-layer GPT2 trained for 30 steps with
HuggingFace's Trainer on the cpu, logging every step to TensorBoard and to trainer_state.json.

    TENSORBOARD_LOGGING_DIR=<out>/runs HF_HUB_OFFLINE=1 python make_run.py <out>

Needs transformers 5.23.0, torch 2.13.0 and (for the events) tensorboard 2.21.0 with protobuf.
"""

import sys

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, count: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, 128, (count, 32), generator=generator)

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return {"input_ids": self.tokens[index], "labels": self.tokens[index]}


def main(out: str) -> None:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=32))
    args = TrainingArguments(
        output_dir=out, max_steps=30, per_device_train_batch_size=4, gradient_accumulation_steps=2,
        learning_rate=1e-3, warmup_steps=5, logging_steps=1, eval_strategy="steps", eval_steps=10,
        save_strategy="no", report_to=["tensorboard"], seed=0, use_cpu=True, max_grad_norm=1.0,
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(256, 1), eval_dataset=RandomTokens(16, 2))
    trainer.train()
    trainer.save_state()
    print(transformers.__version__)


if __name__ == "__main__":
    main(sys.argv[1])
