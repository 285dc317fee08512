"""Fluid-style layer functions: each appends ops to the current program."""

from ..readers import (
    create_py_reader_by_data,
    double_buffer,
    py_reader,
    read_file,
)
from . import (
    activation_more,
    control_flow,
    conv_more,
    decoding,
    extra_ops,
    fluid_compat_more,
    io,
    learning_rate_scheduler,
    lod_meta,
    loss_more,
    math_ops,
    misc_more,
    nn,
    nn_more,
    resize,
    resize_more,
    sequence,
    sequence_labeling,
    sequence_more,
    tensor,
    tensor_more,
)
from .activation_more import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .conv_more import *  # noqa: F403
from .decoding import *  # noqa: F403
from .extra_ops import *  # noqa: F403
from .fluid_compat_more import *  # noqa: F403
from .io import *  # noqa: F403
from .learning_rate_scheduler import *  # noqa: F403
from .lod_meta import *  # noqa: F403
from .loss_more import *  # noqa: F403
from .math_ops import *  # noqa: F403
from .misc_more import *  # noqa: F403
from .nn import *  # noqa: F403
from .nn_more import *  # noqa: F403
from .resize import *  # noqa: F403
from .resize_more import *  # noqa: F403
from .sequence import *  # noqa: F403
from .sequence_labeling import *  # noqa: F403
from .sequence_more import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor_more import *  # noqa: F403

__all__ = [*io.__all__, *nn.__all__, *math_ops.__all__, *tensor.__all__,
           *control_flow.__all__, *learning_rate_scheduler.__all__, *sequence.__all__,
           *resize.__all__, *extra_ops.__all__, *activation_more.__all__,
           *sequence_labeling.__all__,
           *decoding.__all__, *lod_meta.__all__, *tensor_more.__all__,
           *loss_more.__all__, *nn_more.__all__, *sequence_more.__all__,
           *misc_more.__all__, *resize_more.__all__, *conv_more.__all__,
           *fluid_compat_more.__all__, "py_reader", "create_py_reader_by_data",
           "read_file", "double_buffer"]
