"""Small synthetic stand-ins for ``paddle.dataset``: the same module names, reader
functions, sample layouts and dictionary functions as Paddle 1.5's datasets, but
generated on the spot (no download is possible) from a fixed seed, so every run
sees the same samples.

Each dataset has a structure a model can learn in a few steps (house prices a
linear function of the features, digits and images drawn around a prototype per
class, reviews carrying words of their sentiment, text from a fixed Markov chain,
translations a word-for-word mapping, ...): a book chapter's loss falls at once.
They are for running the Paddle book chapters and Fluid scripts, not for
measuring a model's accuracy on the real data.
"""

from . import cifar, conll05, imdb, imikolov, mnist, movielens, uci_housing, wmt14, wmt16

__all__ = ["cifar", "conll05", "imdb", "imikolov", "mnist", "movielens", "uci_housing",
           "wmt14", "wmt16"]
