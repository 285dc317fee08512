"""``fluid-hw master``: the job master, an HTTP service that takes and runs jobs."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..backends.cluster.errors import MasterError
    from ..backends.cluster.master import TOKEN_ENV, Master, read_token, serve

    token = read_token(args.token_file)
    if token is None:
        raise MasterError(f"the master needs a token: set {TOKEN_ENV} or give --token-file "
                          "(a file of mode 0600; make one with python -c 'import secrets; "
                          "print(secrets.token_hex(32))' > PATH)")
    if args.max_upload_bytes < 1:
        raise MasterError(f"--max-upload-bytes must be >= 1, got {args.max_upload_bytes}")
    master = Master(args.state, token, max_upload=args.max_upload_bytes,
                    scheduler=args.scheduler)

    def ready(url: str) -> None:
        print(f"fluid-hw master: listening on {url} (state {master.store.root})", flush=True)
        if not url.startswith(("http://127.", "http://localhost:", "http://::1")):
            print("fluid-hw master: listening beyond this machine; the token travels in "
                  "clear over HTTP: put a TLS proxy or an SSH tunnel in front "
                  "(docs/cluster.md)", file=sys.stderr, flush=True)

    serve(master, args.listen, ready)
    return 0


def register(sub: Any) -> None:
    from ..backends.cluster.master import DEFAULT_MAX_UPLOAD, DEFAULT_PORT

    p = sub.add_parser(
        "master", help="run the job master: an HTTP service taking jobs (fluid-hw submit)",
        description="Accept jobs over HTTP (a training script with its files and "
        "arguments), run each with fluid-hw launch (on this machine or through Slurm), and "
        "keep their records, outputs and checkpoints in --state, so a restarted master "
        "still knows them.  Every request needs the token.  See docs/cluster.md.")
    p.add_argument("--listen", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                   help=f"where to listen (default 127.0.0.1:{DEFAULT_PORT}: this machine "
                   "only; port 0 picks a free one)")
    p.add_argument("--state", default="build/master", metavar="DIR",
                   help="job records, uploads, outputs, checkpoints (default build/master)")
    p.add_argument("--token-file", metavar="PATH", help="the token, in a file of mode 0600 "
                   "(default $FLUID_HW_TOKEN, else $FLUID_HW_TOKEN_FILE)")
    p.add_argument("--max-upload-bytes", type=int, default=DEFAULT_MAX_UPLOAD, metavar="N",
                   help=f"largest submission accepted (default {DEFAULT_MAX_UPLOAD >> 20} MiB)")
    p.add_argument("--scheduler", choices=["local", "slurm"], default="local",
                   help="how jobs run unless a submission says: local MPI (default) or Slurm")
    p.set_defaults(fn=_run)
