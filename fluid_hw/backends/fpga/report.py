"""``BUILD_DIR/report.json``: one file, filled in by each build step.

Writes are atomic (a temporary file renamed over the report) and merge: a step adds
or replaces its own keys and leaves the others', so an absent key means its step
has not run.  :data:`STEP_KEYS` says which step owns which key (one table,
``fluid_hw.drivers.build_dir.REPORT_KEYS``, which the build folder's reader and
writer :class:`~fluid_hw.drivers.build_dir.BuildDir` owns).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ...drivers.build_dir import NAMES, REPORT_KEYS, BuildDir, BuildDirError, to_json
from ...errors import ReportError

__all__ = ["REPORT", "STEP_KEYS", "ReportError", "read_report", "update_report", "to_json"]

REPORT = NAMES["report"]

#: keys of report.json by the step that writes them (shared/DESIGN.md, Build report)
STEP_KEYS: dict[str, tuple[str, ...]] = REPORT_KEYS


def read_report(build_dir: str | os.PathLike[str], *, missing_ok: bool = True
                ) -> dict[str, Any]:
    """report.json as it is (no manifest check: :meth:`BuildDir.report` checks)."""
    bd = BuildDir(build_dir)
    if not bd.file("report").exists() and not missing_ok:
        raise ReportError(f"{bd.file('report')}: not found; run `fluid-hw compile` into "
                          f"{build_dir} first")
    try:
        return bd.report(check=False)
    except BuildDirError as e:
        raise ReportError(str(e)) from None


def update_report(build_dir: str | os.PathLike[str], keys: dict[str, Any],
                  drop: Iterable[str] = ()) -> dict[str, Any]:
    """Merge ``keys`` into the report (removing ``drop``) and write it atomically;
    returns the whole report."""
    return BuildDir(build_dir).update_report(None, keys, list(drop))
