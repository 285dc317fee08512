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


@pytest.fixture(scope="session")
def slurm():
    """A one-node Slurm cluster for the whole test session (installed with apt-get
    when missing and we are root); its client environment (``SLURM_CONF``)."""
    from . import slurm_cluster

    why = slurm_cluster.install()
    if why:
        pytest.skip(why)
    cluster = slurm_cluster.start()
    try:
        yield cluster.env
    finally:
        cluster.stop()
