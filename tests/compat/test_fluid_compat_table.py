"""docs/fluid_compat.md lists every Paddle 1.5 name of tests/compat/paddle15_api.py with
the status the code has, a reason for each one not provided, and fluid.layers reaches
issue 20's share."""

import re
from pathlib import Path

import pytest

from tests.compat import paddle15_api as api

DOC = Path(__file__).resolve().parents[2] / "docs" / "fluid_compat.md"
ROW = re.compile(r"^\| `([^`]+)` \| (yes|no) \| (.*) \|$")
REGEN = "regenerate it: .venv/bin/python -m tests.compat.paddle15_api > docs/fluid_compat.md"


def _table() -> dict[str, dict[str, tuple[str, str]]]:
    out: dict[str, dict[str, tuple[str, str]]] = {}
    section = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].split(":")[0]
            out[section] = {}
        elif (m := ROW.match(line)) and section is not None:
            assert m.group(1) not in out[section], f"{section}.{m.group(1)} listed twice"
            out[section][m.group(1)] = (m.group(2), m.group(3))
    return out


def test_every_name_is_listed_once_with_a_reason_when_missing():
    table = _table()
    assert set(table) == set(api.SECTIONS)
    for section, names in api.SECTIONS.items():
        assert sorted(table[section]) == sorted(names), f"{section}: {REGEN}"
        for name, (status, why) in table[section].items():
            assert status == "yes" or why.strip(), f"{section}.{name}: no reason given"


@pytest.mark.parametrize("section", list(api.SECTIONS))
def test_status_matches_the_code(section):
    table = _table()[section]
    wrong = [n for n, (status, _) in table.items() if status == "yes"
             and not api.provided(section, n)]
    assert not wrong, f"{section}: listed as provided but missing: {wrong}"
    if section in ("fluid.layers", "fluid.optimizer"):
        stale = [n for n, (status, _) in table.items() if status == "no"
                 and api.provided(section, n)]
        assert not stale, f"{section}: provided now but listed as not: {stale}; {REGEN}"


def test_the_stated_shares_are_the_measured_ones():
    text = DOC.read_text()
    for section in ("fluid.layers", "fluid.optimizer"):
        have, total = api.share(section)
        assert f"## {section}: {have} of {total} " in text, f"{section}: {REGEN}"


def test_layers_share_reaches_85_percent():
    have, total = api.share("fluid.layers")
    assert have / total >= 0.85, f"fluid.layers provides {have} of {total} Paddle 1.5 names"
