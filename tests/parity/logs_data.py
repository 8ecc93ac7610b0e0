"""Where the tests' data lie: real public logs (data/logs/README.md), the H200 runs (committed baselines:
reference_train/baselines/README.md), the committed bands and the perturbed runs they were measured from
(data/band-references/README.md)."""

from pathlib import Path

from portlayer.train.band import BANDS
from portlayer.train.runfile import BASELINES

DATA = Path(__file__).parent / "data"
LOGS = DATA / "logs"


def h200_run(preset: str, precision: str) -> Path:
    """The H200's run of a tiny preset in fp32 or bf16."""
    return BASELINES / (f"{preset}.cuda-h200.json" if precision == "fp32" else f"{preset}.cuda-h200-bf16.json")


def band_path(preset: str, precision: str) -> Path:
    return BANDS / f"{preset}.{precision}.json"


def band_references(preset: str, precision: str) -> list[Path]:
    """The perturbed runs `portlayer parity band` trained for the committed band."""
    return sorted((DATA / "band-references" / f"{preset}.{precision}").glob("*.perturbed-*.json"))
