"""Load a Paddle book chapter script from examples/book/ as a module, and the
checks every chapter test makes."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

BOOK = Path(__file__).resolve().parents[2] / "examples" / "book"


def chapter(name: str) -> ModuleType:
    """The chapter script ``examples/book/<name>.py``, imported (its ``__main__``
    block does not run)."""
    key = f"book_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, BOOK / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def assert_loss_falls(losses: list[float], window: int = 3, factor: float = 0.8) -> None:
    """The mean of the last ``window`` losses is below ``factor`` times the mean of
    the first ``window``, and no loss is NaN or infinite."""
    assert len(losses) >= 2 * window, f"only {len(losses)} steps ran"
    assert np.all(np.isfinite(losses)), losses
    first, last = np.mean(losses[:window]), np.mean(losses[-window:])
    assert last < factor * first, f"loss did not fall: first {first:.4f}, last {last:.4f}"
