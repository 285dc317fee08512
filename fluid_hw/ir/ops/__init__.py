"""Built-in op definitions.  Importing this package registers them all."""

from . import (  # noqa: F401
    activation,
    backward_ops,
    compare,
    control_flow,
    distributed,
    elementwise,
    extra,
    feed_fetch,
    fused,
    interp,
    lod_array,
    loss,
    math,
    nn,
    onnx_extra,
    optimizer,
    quant,
    random,
    sequence,
    tensor,
)
