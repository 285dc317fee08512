import random

import pytest


@pytest.fixture(autouse=True)
def _seeded_shuffle():
    """paddle.reader.shuffle draws from Python's random: seed it so that every
    run of a chapter test sees the same batches."""
    state = random.getstate()
    random.seed(0)
    yield
    random.setstate(state)
