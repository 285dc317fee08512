"""Built-in op definitions.  Importing this package registers them all."""

from . import (  # noqa: F401
    activation,
    backward_ops,
    compare,
    elementwise,
    feed_fetch,
    loss,
    math,
    nn,
    optimizer,
    random,
    tensor,
)
