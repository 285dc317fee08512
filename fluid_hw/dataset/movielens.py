"""Synthetic ``paddle.dataset.movielens`` (MovieLens 1M layout): 100 users, 200
movies, ratings 1-5 set by how well a user's taste (from gender, age and job)
matches a movie's categories. Samples are ``[user_id, gender_id, age_id, job_id,
movie_id, category_ids, title_ids, [score]]`` as Paddle's; 2000 training and 400
test ratings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ._synth import Reader, rng

age_table = [1, 18, 25, 35, 45, 50, 56]

_CATEGORIES = ["Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
               "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical",
               "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western"]
_USERS, _MOVIES, _JOBS, _TITLE_WORDS = 100, 200, 21, 300
_COUNTS = {"train": 2000, "test": 400}


@dataclass(frozen=True)
class MovieInfo:
    """A movie: id, title and category names."""

    index: int
    categories: list[str]
    title: str

    def value(self) -> list[Any]:
        cats, words = movie_categories(), get_movie_title_dict()
        return [self.index, [cats[c] for c in self.categories],
                [words[w] for w in self.title.lower().split()]]


@dataclass(frozen=True)
class UserInfo:
    """A user: id, gender (``M``/``F``), age (one of ``age_table``) and job id."""

    index: int
    is_male: bool
    age: int
    job_id: int

    def value(self) -> list[int]:
        return [self.index, 0 if self.is_male else 1, age_table.index(self.age), self.job_id]


@cache
def movie_info() -> dict[int, MovieInfo]:
    """movie id (1-based) -> :class:`MovieInfo`."""
    r = rng("movielens", "movies")
    out = {}
    for m in range(1, _MOVIES + 1):
        cats = sorted(set(r.choice(_CATEGORIES, size=int(r.randint(1, 4))).tolist()))
        title = " ".join(f"t{int(t)}" for t in r.randint(0, _TITLE_WORDS, size=r.randint(1, 5)))
        out[m] = MovieInfo(m, cats, title)
    return out


@cache
def user_info() -> dict[int, UserInfo]:
    """user id (1-based) -> :class:`UserInfo`."""
    r = rng("movielens", "users")
    return {u: UserInfo(u, bool(r.rand() < 0.5), int(r.choice(age_table)),
                        int(r.randint(0, _JOBS))) for u in range(1, _USERS + 1)}


def movie_categories() -> dict[str, int]:
    """category name -> id."""
    return {c: i for i, c in enumerate(_CATEGORIES)}


def get_movie_title_dict() -> dict[str, int]:
    """title word (lower case) -> id."""
    return {f"t{i}": i for i in range(_TITLE_WORDS)}


def max_movie_id() -> int:
    return _MOVIES


def max_user_id() -> int:
    return _USERS


def max_job_id() -> int:
    return _JOBS - 1


@cache
def _tastes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    taste = rng("movielens", "taste")
    return (taste.standard_normal((2, len(_CATEGORIES))),
            taste.standard_normal((len(age_table), len(_CATEGORIES))),
            taste.standard_normal((_JOBS, len(_CATEGORIES))))


def _score(user: UserInfo, movie: MovieInfo) -> float:
    by_gender, by_age, by_job = _tastes()
    u = (by_gender[0 if user.is_male else 1] + by_age[age_table.index(user.age)]
         + by_job[user.job_id])
    m = np.zeros(len(_CATEGORIES))
    for c in movie.categories:
        m[_CATEGORIES.index(c)] = 1.0
    affinity = float(u @ m) / max(len(movie.categories), 1)
    return float(np.clip(np.round(3.0 + 1.2 * affinity), 1, 5))


def _reader(split: str) -> Reader:
    def reader() -> Iterator[list[Any]]:
        users, movies = user_info(), movie_info()
        r = rng("movielens", split)
        for _ in range(_COUNTS[split]):
            u = users[int(r.randint(1, _USERS + 1))]
            m = movies[int(r.randint(1, _MOVIES + 1))]
            yield u.value() + m.value() + [[_score(u, m)]]

    return reader


def train() -> Reader:
    """Training reader: ``[user_id, gender_id, age_id, job_id, movie_id,
    category_ids, title_ids, [score]]``."""
    return _reader("train")


def test() -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test")
