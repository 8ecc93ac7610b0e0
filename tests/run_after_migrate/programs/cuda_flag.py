"""An LSTM language model driven by an argparse `--cuda` flag, in the shape of the older PyTorch
word-language-model example: `import torch.onnx` beside `import torch`, a "you have a CUDA device" warning
behind `torch.cuda.is_available()`, `torch.device("cuda" if args.cuda else "cpu")`, batches moved with
`.to(device)`, a hand-written SGD step, and the whole model saved and loaded back for the final score.
Usage: `python cuda_flag.py --cuda --epochs 3 --save MODEL.pt`.
"""

import argparse
import math

import torch
import torch.nn as nn
import torch.onnx

parser = argparse.ArgumentParser(description="PyTorch LSTM language model")
parser.add_argument("--lr", type=float, default=2.0, help="initial learning rate")
parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
parser.add_argument("--epochs", type=int, default=3, help="upper epoch limit")
parser.add_argument("--batch_size", type=int, default=8, help="batch size")
parser.add_argument("--bptt", type=int, default=12, help="sequence length")
parser.add_argument("--seed", type=int, default=1111, help="random seed")
parser.add_argument("--cuda", action="store_true", default=False, help="use CUDA")
parser.add_argument("--save", type=str, default="model.pt", help="path to save the final model")
args = parser.parse_args()

torch.manual_seed(args.seed)
if torch.cuda.is_available():
    if not args.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")
    else:
        torch.cuda.manual_seed(args.seed)

device = torch.device("cuda" if args.cuda else "cpu")

ntokens = 16
# A corpus with structure an LSTM picks up in a few batches: a repeating phrase of token ids.
corpus = torch.tensor([0, 3, 5, 7, 3, 9, 11, 2, 14, 6] * 60)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(1, bsz, self.nhid), weight.new_zeros(1, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


train_data = batchify(corpus, args.batch_size)
model = RNNModel(ntokens, 16, 32).to(device)
criterion = nn.CrossEntropyLoss()


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(args.batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    hidden = model.init_hidden(args.batch_size)
    for i in range(0, train_data.size(0) - 1, args.bptt):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-args.lr)


for epoch in range(1, args.epochs + 1):
    val_loss = evaluate(train_data)
    print(
        f"| epoch {epoch:3d} | valid loss {val_loss:5.3f} | valid ppl {math.exp(val_loss):8.2f}", flush=True
    )
    train()

with open(args.save, "wb") as f:
    torch.save(model, f)
with open(args.save, "rb") as f:
    model = torch.load(f, weights_only=False)
    model.rnn.flatten_parameters()
print(f"| end of training | test loss {evaluate(train_data):5.3f}", flush=True)
print(f"model on {next(model.parameters()).device.type}", flush=True)
