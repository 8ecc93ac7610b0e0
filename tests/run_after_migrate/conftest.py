from pathlib import Path

import pytest

# DeepSpeed's cpu accelerator builds its shared-memory collective on first use (ninja, ~1 min): once per
# checkout, beside the stand-in device, not in the user-wide cache other checkouts' builds overwrite.
EXTENSIONS = Path(__file__).resolve().parents[1] / ".fake_device_cache" / "torch_extensions"


@pytest.fixture
def deepspeed_extensions_of_this_checkout(monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(EXTENSIONS))
