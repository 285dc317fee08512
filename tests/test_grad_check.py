"""Every differentiable op: analytic gradient == central differences (float64).

Cases live in tests/grad/cases_*.py.  A second test makes sure every registered
op either has a gradient with at least one case here, or is declared without one
for an accepted reason (fluid_hw.ir.grad.NO_GRAD_REASONS).
"""

import importlib
import pkgutil

import pytest

import tests.grad as cases_pkg
from fluid_hw.ir import all_ops
from fluid_hw.ir.grad import GradMaker, NoGrad
from tests.grad_harness import check_grad


def _all_cases():
    out = []
    for m in pkgutil.iter_modules(cases_pkg.__path__):
        if m.name.startswith("cases_"):
            out += importlib.import_module(f"tests.grad.{m.name}").CASES
    return out


CASES = _all_cases()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient_matches_central_differences(case):
    getattr(case, "checker", check_grad)(case)


def test_every_op_has_a_gradient_or_a_reason():
    checked = {c.op for c in CASES}
    no_decl, unchecked = [], []
    for name, d in sorted(all_ops().items()):
        if isinstance(d.grad, GradMaker):
            if name not in checked:
                unchecked.append(name)
        elif not isinstance(d.grad, NoGrad):
            no_decl.append(name)
    assert not no_decl, f"ops with neither a gradient nor a no-grad reason: {no_decl}"
    assert not unchecked, f"ops with a gradient but no gradient-check case: {unchecked}"
