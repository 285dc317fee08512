"""The ``fluid-hw`` command.  Nothing imports this package."""
