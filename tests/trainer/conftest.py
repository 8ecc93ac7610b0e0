import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def portlayer_cache(tmp_path_factory):
    """One corpus, tokenizer and token cache per test session, away from the user's ~/.cache."""
    path = tmp_path_factory.mktemp("portlayer-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PORTLAYER_CACHE", str(path))
        yield path


@pytest.fixture
def restore_torch_switches():
    """Training in-process flips process-wide switches (deterministic algorithms, matmul precision)."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    precision = torch.get_float32_matmul_precision()
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.set_float32_matmul_precision(precision)
