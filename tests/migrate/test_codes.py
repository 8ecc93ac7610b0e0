"""The codes table is the one source of truth: documented, and each diagnostic fires where it should."""

import pathlib
import re

import pytest

from portlayer.migrate.codes import CODES, markdown
from portlayer.migrate.engine import migrate_source

ROOT = pathlib.Path(__file__).resolve().parents[2]

# code -> (target, source, expected line, expected col)
FIRES = {
    "PL201": ("neutral", "from apex import amp\n", 1, 6),
    "PL202": ("npu", "import torch\nfrom flash_attn import flash_attn_func\n", 2, 6),
    "PL203": ("neutral", "import xformers.ops as xops\n", 1, 8),
    "PL204": ("musa", "import bitsandbytes as bnb\n", 1, 8),
    "PL205": ("neutral", "import triton\n", 1, 8),
    "PL206": ("neutral", "import transformer_engine.pytorch as te\n", 1, 8),
    "PL207": ("neutral", "from liger_kernel.transformers import apply_liger_kernel_to_llama\n", 1, 6),
    "PL208": ("neutral", "import cupy as cp\n", 1, 8),
    "PL209": ("neutral", "import pynvml\n", 1, 8),
    "PL210": ("neutral", "import pycuda.driver\n", 1, 8),
    "PL211": ("neutral", "import nvidia_resiliency_ext.fault_tolerance as ft\n", 1, 8),
    "PL212": ("torch", "from mamba_ssm import Mamba\n", 1, 6),
    "PL213": ("neutral", "from apex.optimizers import FusedLAMB\nopt = FusedLAMB(ps)\n", 2, 7),
    "PL214": ("neutral", "from apex.optimizers import FusedSGD\nopt = FusedSGD(ps, lr=0.1)\n", 2, 7),
    "PL215": ("neutral", "from apex import amp\nm, o = amp.initialize(m, o, opt_level='O1')\n", 2, 8),
    "PL216": ("torch", "import bitsandbytes as bnb\nopt = bnb.optim.AdamW8bit(ps)\n", 2, 7),
    "PL217": ("npu", "from liger_kernel.transformers import apply_liger_kernel_to_llama\n"
                     "apply_liger_kernel_to_llama()\n", 2, 1),
    "PL218": ("neutral", "from apex.normalization import MixedFusedLayerNorm\nln = MixedFusedLayerNorm(8)\n", 2, 6),
    "PL219": ("musa", "from liger_kernel.transformers import LigerRMSNorm\nn = LigerRMSNorm(8, offset=1.0)\n", 2, 5),
    "PL220": ("neutral", "import amp_C\nfrom apex.multi_tensor_apply import multi_tensor_applier as mta\n"
                         "n, _ = mta(amp_C.multi_tensor_l2norm, buf, [gs], False)\n", 3, 8),
    "PL221": ("neutral", "from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss as L\nf = L()\n",
              2, 5),
    "PL230": ("torch", "from flash_attn import flash_attn_func\nx = flash_attn_func(q, k, v, softcap=30.0)\n", 2, 5),
    "PL231": ("musa", "import xformers.ops as xops\nx = xops.memory_efficient_attention(q, k, v, b)\n", 2, 5),
    "PL301": ("npu", "import torch\ntorch.backends.cudnn.deterministic = True\n", 2, 1),
    "PL302": ("neutral", "import torch\nx = 1; torch.backends.cudnn.benchmark = True\n", 2, 8),
    "PL303": ("torch", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", 2, 1),
    "PL401": ("neutral", "import torch\nif ok:\n    pool = torch.cuda.MemPool()\n", 3, 12),
    "PL402": ("musa", "import torch\ng = torch.cuda.CUDAGraph()\n", 2, 5),
    "PL403": ("neutral", "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('k', ['k.cu'])\n", 2, 7),
    "PL404": ("neutral", "import torch.utils.cpp_extension as ce\nm = ce.load_inline('k', '', cuda_sources=s)\n", 2, 5),
    "PL405": ("neutral", "gpus = ['cuda:0']\n", 1, 9),
    "PL406": ("neutral", "import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n", 2, 20),
    "PL407": ("neutral", "from torch.nn.parallel import DistributedDataParallel as DDP\n"
                         "m = DDP(m, device_ids=[rank], output_device=0)\n", 2, 31),
    "PL408": ("neutral", "from torch.profiler import ProfilerActivity\nacts = [ProfilerActivity.CUDA]\n", 2, 9),
    "PL409": ("npu", "import torch\nif version.parse(torch.version.cuda) >= version.parse('11.8'): ...\n", 2, 18),
    "PL410": ("neutral", "import torch.cuda.nccl\n", 1, 8),
    "PL411": ("neutral", "import torch\nif is_npu_available():\n    torch.npu.set_device(0)\n"
                         "else:\n    torch.cuda.set_device(0)\n", 2, 1),
    "PL413": ("neutral", "from deepspeed.accelerator import get_accelerator\nd = get_accelerator().device_name()\n", 2, 5),
    "PL414": ("neutral", "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
                         "m = FSDP(m, device_id=args.gpu)\n", 2, 23),
    "PL415": ("musa", "import deepspeed\n", 1, 8),
    "PL416": ("musa", "if is_npu_available():\n    from torch.npu.amp import GradScaler\n"
                      "else:\n    from torch.cuda.amp import GradScaler\ns = GradScaler()\n", 4, 5),
    # An int is taken for a CUDA device in a file with CUDA code (`rank` alone sends no file through the rules).
    "PL412": ("neutral", "import torch\ntorch.cuda.synchronize()\nx = torch.ones(1).to(local_rank)\n", 3, 22),
    "PL417": ("neutral", "import subprocess\nout = subprocess.check_output([\"nvidia-smi\", \"-L\"])\n", 2, 32),
    "PL614": ("musa", "import os\nos.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"backend:cudaMallocAsync\"\n", 2, 12),
    "PL501": ("npu", "import torch\nx = torch.ones(2, dtype=torch.float64)\n", 2, 25),
    "PL502": ("neutral", "import torch\nx = torch.ones(2).cuda().double()\n", 2, 5),
    "PL605": ("npu", "import os\nos.environ['NCCL_P2P_LEVEL'] = 'NVL'\n", 2, 12),
    "PL606": ("neutral", "import os\nos.getenv('CUDA_VISIBLE_DEVICES')\n", 2, 11),
    "PL607": ("torch", "import os\nos.environ['NCCL_DEBUG'] = 'INFO'\n", 2, 12),
    "PL608": ("npu", "import os\nos.environ['NCCL_BUFFSIZE'] = '1048576'\n", 2, 12),
}
# A call left as is keeps its import, which the library's own code reports too: code -> (its code, col).
IMPORT_REPORTED = {"PL213": ("PL201", 6), "PL215": ("PL201", 6), "PL219": ("PL207", 6), "PL230": ("PL202", 6),
                   "PL231": ("PL203", 8)}
# Emitted by the migrate driver (shell scripts, accelerate configs, files it cannot read), not by the Python engine.
DRIVER_CODES = {"PL601", "PL602", "PL603", "PL604", "PL609", "PL610", "PL611", "PL612", "PL613", "PL901", "PL902"}


def test_docs_table_is_generated_from_codes_py():
    assert (ROOT / "docs" / "migrate-codes.md").read_text() == markdown()


def test_code_ranges_and_severities():
    for code, row in CODES.items():
        assert re.fullmatch(r"PL[1-9]\d\d", code)
        expected = {"1": {"change"}, "9": {"error"}}.get(code[2], {"error", "warning", "info"})
        assert row.severity in expected, code
        assert row.title and row.hint


def test_every_code_the_rules_use_is_in_the_table():
    used = set()
    for path in (ROOT / "migrate").rglob("*.py"):
        used |= set(re.findall(r'"(PL\d{3})"', path.read_text()))
    assert used <= set(CODES)


def test_every_diagnostic_code_has_a_case_here_or_belongs_to_the_driver():
    diagnostics = {code for code, row in CODES.items() if row.severity != "change"}
    assert diagnostics == set(FIRES) | DRIVER_CODES


@pytest.mark.parametrize("code", sorted(FIRES))
def test_diagnostic_fires_at_its_site(code):
    target, source, line, col = FIRES[code]
    result = migrate_source(source, target)
    also = [(IMPORT_REPORTED[code][0], 1, IMPORT_REPORTED[code][1])] if code in IMPORT_REPORTED else []
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == [*also, (code, line, col)]
    assert result.diagnostics[-1].severity == CODES[code].severity


def test_flash_attention_2_in_transformers_counts_as_flash_attn():
    (diagnostic,) = migrate_source("m = M.from_pretrained(p, attn_implementation='flash_attention_2')\n").diagnostics
    assert diagnostic.code == "PL202"
