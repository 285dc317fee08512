"""One rank of a launched job: ``python -m fluid_hw.backends.cluster.run_rank SCRIPT ARGS``.

What ``fluid-hw launch`` runs on every rank (and what a hand-written
``mpiexec``/``srun`` line should run):

* every line the rank prints gets its role as a prefix (``[pserver 0] ...``,
  ``[trainer 1] ...``), written with one ``write`` so ranks' lines never mix;
* the script runs as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]``;
* an exception, or a non-zero exit, aborts the whole MPI job at once (as
  ``python -m mpi4py`` does) instead of leaving the other ranks waiting.
"""

from __future__ import annotations

import io
import os
import runpy
import sys
import traceback
from typing import Any, TextIO

from .role import ClusterRole


class PrefixedLines(io.TextIOBase):
    """A text stream that writes whole lines, each starting with ``prefix``."""

    def __init__(self, target: TextIO, prefix: str) -> None:
        self.target = target
        self.prefix = prefix
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.pending += s
        if "\n" in self.pending:
            *lines, self.pending = self.pending.split("\n")
            self.target.write("".join(f"{self.prefix}{ln}\n" for ln in lines))
            self.target.flush()
        return len(s)

    def flush(self) -> None:
        if self.pending:
            self.target.write(f"{self.prefix}{self.pending}\n")
            self.pending = ""
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return False


def _abort(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        from .comm import get_comm

        get_comm().comm.Abort(code)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m fluid_hw.backends.cluster.run_rank SCRIPT [ARGS...]",
              file=sys.stderr)
        return 2
    role = ClusterRole.from_env()
    label = role.label if not role.is_local else f"rank {os.environ.get('PMI_RANK', '0')}"
    assert sys.__stdout__ is not None and sys.__stderr__ is not None
    out: Any = PrefixedLines(sys.__stdout__, f"[{label}] ")
    err: Any = PrefixedLines(sys.__stderr__, f"[{label}] ")
    sys.stdout, sys.stderr = out, err
    script = args[0]
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    out.flush()
    err.flush()
    if code and not role.is_local:
        print(f"exit code {code}: aborting the job", file=sys.stderr)
        _abort(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
