"""backends/kitten-tts:cpu, packaged by Pants: what can be tested offline (see tts_offline_cases)."""
import pytest

from tests.integration.tts_offline_cases import *  # noqa: F401,F403 (the shared test cases)


@pytest.fixture(scope="module")
def backend_name() -> str:
    return "kitten-tts"
