"""A Hugging Face `Trainer` fine-tuning script as people write them for one CUDA box: mixed precision and the
NCCL backend in `TrainingArguments`, a tokenizer and a dataset read from local folders, and a generation
check afterwards on `"cuda" if torch.cuda.is_available() else "cpu"`. Nothing is downloaded: the tiny
model is built from a config, the word-level tokenizer and the corpus are made here.
Usage: `HF_HUB_OFFLINE=1 python hf_trainer.py OUT_DIR` (or under torchrun).
"""

import os
import sys

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

out_dir = sys.argv[1] if len(sys.argv) > 1 else "out"
tokenizer_dir = os.path.join(out_dir, "tokenizer")
words = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "lay", "by", "the", "door"]

if not os.path.exists(os.path.join(tokenizer_dir, "tokenizer.json")):
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", *dict.fromkeys(words)])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(tokenizer_dir)  # every rank writes the same bytes
tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

lines = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 8
dataset = Dataset.from_dict({"text": lines}).map(
    lambda batch: tokenizer(batch["text"], truncation=True, max_length=16),
    batched=True,
    remove_columns=["text"],
)

config = GPT2Config(
    vocab_size=len(tokenizer),
    n_positions=32,
    n_embd=32,
    n_layer=1,
    n_head=2,
    bos_token_id=tokenizer.eos_token_id,
    eos_token_id=tokenizer.eos_token_id,
)
model = GPT2LMHeadModel(config)

args = TrainingArguments(
    output_dir=out_dir,
    per_device_train_batch_size=8,
    max_steps=12,
    learning_rate=5e-3,
    warmup_steps=0,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    fp16=torch.cuda.is_available() and not torch.cuda.is_bf16_supported(),
    bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
    ddp_backend="nccl" if "LOCAL_RANK" in os.environ else None,
    dataloader_pin_memory=True,
    seed=0,
    disable_tqdm=True,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=dataset,
    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
)
trainer.train()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.cuda.empty_cache()
if trainer.is_world_process_zero():
    inputs = tokenizer("the cat", return_tensors="pt").to(device)
    generated = trainer.model.to(device).generate(**inputs, max_new_tokens=4, do_sample=False)
    # One write: with PYTHONUNBUFFERED print's pieces are separate writes, and the other rank's lines fall between them.
    print(f"generated: {tokenizer.decode(generated[0])}", flush=True)
    print(f"model on {trainer.model.device.type}", flush=True)
