import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def workdir():
    """A temporary folder removed after the test (pytest's tmp_path folders stay)."""
    d = Path(tempfile.mkdtemp(prefix="fluid_hw_cluster_"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def moddir():
    d = Path(tempfile.mkdtemp(prefix="fluid_hw_cluster_"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
