"""Built-in op definitions.  Importing this package registers them all."""

from . import (  # noqa: F401
    activation,
    elementwise,
    feed_fetch,
    loss,
    math,
    nn,
    random,
    tensor,
)
