"""What a Fluid 1.x script imports as ``paddle``: ``batch``, ``reader`` (the
reader decorators) and ``dataset`` (the synthetic datasets of
:mod:`fluid_hw.dataset`). A script written for Paddle 1.5 runs after changing::

    import paddle                    ->  import fluid_hw.paddle_compat as paddle
    import paddle.fluid as fluid     ->  import fluid_hw as fluid

This is deliberately not a top-level package named ``paddle``, which would shadow
a real PaddlePaddle install.
"""

import sys

from .. import dataset
from . import reader
from .batch import batch

# ``import paddle.dataset.conll05 as conll05`` becomes
# ``import fluid_hw.paddle_compat.dataset.conll05 as conll05``: the dataset modules
# are importable under this package's name too.
sys.modules[f"{__name__}.dataset"] = dataset
for _name in dataset.__all__:
    sys.modules[f"{__name__}.dataset.{_name}"] = getattr(dataset, _name)

__all__ = ["batch", "dataset", "reader"]
