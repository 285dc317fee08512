"""Small bundled data sets (no downloads)."""

from .digits import DIGITS_TEST_SIZE, load_digits_split

__all__ = ["DIGITS_TEST_SIZE", "load_digits_split"]
