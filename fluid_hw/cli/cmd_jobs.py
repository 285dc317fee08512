"""``fluid-hw submit``, ``jobs``, ``logs``, ``cancel``: a job master's client."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def _client(args: argparse.Namespace) -> Any:
    from ..backends.cluster.master_client import Client

    return Client(args.master, token_file=args.token_file)


def _submit(args: argparse.Namespace) -> int:
    from ..backends.cluster.errors import MasterError
    from ..backends.cluster.master_client import program_submission, submission

    c = _client(args)
    fields = dict(name=args.name, pservers=args.pservers, trainers=args.trainers,
                  mode=args.mode, scheduler=args.scheduler,
                  checkpoint_every=args.checkpoint_every, max_restarts=args.max_restarts,
                  timeout=args.timeout)
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    if args.resume_from:
        sub = {"resume_from": args.resume_from, "args": script_args,
               **{k: v for k, v in fields.items() if v is not None}}
    elif args.program:
        sub = program_submission(args.program, ([args.script] if args.script else [])
                                 + script_args, **fields)
    elif args.script:
        sub = submission(args.script, script_args, args.file or [], **fields)
    else:
        raise MasterError("fluid-hw submit needs SCRIPT (or --program DIR, or --resume-from "
                          "JOB)")
    rec = c.submit(sub)
    print(rec["id"])
    print(f"fluid-hw submit: job {rec['id']} ({rec['name']}) {rec['state']}; follow it with "
          f"fluid-hw logs --follow {rec['id']}", file=sys.stderr)
    if args.follow:
        state = c.logs(rec["id"], _out, follow=True)
        return 0 if state == "succeeded" else 1
    return 0


def _out(s: str) -> None:
    sys.stdout.write(s)
    sys.stdout.flush()


def _jobs(args: argparse.Namespace) -> int:
    jobs = _client(args).jobs()
    if args.json:
        print(json.dumps(jobs, indent=1))
        return 0
    print(f"{'ID':26} {'NAME':18} {'STATE':10} {'STEP':>6} {'EXIT':>5} {'MODE':10} "
          f"{'SCHED':6} AGE")
    for j in jobs:
        step = "" if j.get("step") is None else str(j["step"])
        code = "" if j.get("exit_code") is None else str(j["exit_code"])
        age = f"{time.time() - j['created']:.0f}s"
        print(f"{j['id']:26} {j['name'][:18]:18} {j['state']:10} {step:>6} {code:>5} "
              f"{j['mode']:10} {j['scheduler']:6} {age}")
    return 0


def _logs(args: argparse.Namespace) -> int:
    write = _out
    if args.role:  # whole lines of one rank, without their prefix
        prefix, pending = f"[{args.role}] ", [""]

        def write(s: str) -> None:
            *lines, pending[0] = (pending[0] + s).split("\n")
            _out("".join(ln[len(prefix):] + "\n" for ln in lines if ln.startswith(prefix)))

    state = _client(args).logs(args.job, write, follow=args.follow)
    return 0 if not args.follow or state == "succeeded" else 1


def _cancel(args: argparse.Namespace) -> int:
    st = _client(args).cancel(args.job)
    print(f"fluid-hw cancel: job {st['id']} {st['state']}")
    return 0


def _common(p: Any) -> None:
    p.add_argument("--master", metavar="URL", help="the master (default $FLUID_HW_MASTER, "
                   "else http://127.0.0.1:8470)")
    p.add_argument("--token-file", metavar="PATH", help="the master's token, in a file of "
                   "mode 0600 (default $FLUID_HW_TOKEN, else $FLUID_HW_TOKEN_FILE)")


def register(sub: Any) -> None:
    p = sub.add_parser(  # no abbreviations: the script's own options follow SCRIPT
        "submit", allow_abbrev=False,
        help="submit a training script to a job master (fluid-hw master)",
        description="Upload SCRIPT (and --file inputs, under their paths relative to the "
        "script's folder) to the master, which runs it as a cluster job; prints the job id.  "
        "--resume-from JOB runs a stopped job again from its last complete checkpoint.")
    _common(p)
    p.add_argument("--name", help="the job's name (default: the script's)")
    p.add_argument("--pservers", type=int, help="parameter servers (default 2)")
    p.add_argument("--trainers", type=int, help="trainers (default 2)")
    p.add_argument("--mode", choices=["sync", "async", "collective"], help="default sync")
    p.add_argument("--scheduler", choices=["local", "slurm"],
                   help="local MPI or Slurm (default: the master's)")
    p.add_argument("--checkpoint-every", type=int, metavar="K", help="default 10")
    p.add_argument("--max-restarts", type=int, metavar="N", help="default 0")
    p.add_argument("--timeout", type=float, help="stop the job after this many seconds")
    p.add_argument("--file", action="append", metavar="PATH",
                   help="another file the job needs (repeatable)")
    p.add_argument("--program", metavar="DIR", help="a saved program job instead of a "
                   "script (main.pb, startup.pb, job.json, data; program_job.save_job "
                   "writes one); the master checks and splits it; SCRIPT ARGS are then the "
                   "job's options, e.g. --save-params DIR")
    p.add_argument("--resume-from", metavar="JOB", help="run job JOB again (its files, "
                   "settings and checkpoints), from its last complete checkpoint")
    p.add_argument("--follow", action="store_true", help="print the job's output until it "
                   "ends; exit 0 when it succeeded")
    p.add_argument("script", nargs="?", help="the training script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(fn=_submit)

    p = sub.add_parser("jobs", help="list a job master's jobs: state, step, exit code")
    _common(p)
    p.add_argument("--json", action="store_true", help="the records as JSON")
    p.set_defaults(fn=_jobs)

    p = sub.add_parser("logs", help="print a job's output (from its master)")
    _common(p)
    p.add_argument("--follow", "-f", action="store_true", help="until the job ends")
    p.add_argument("--role", metavar="ROLE", help="only one rank's lines, e.g. 'trainer 0' "
                   "or 'pserver 1'")
    p.add_argument("job", help="the job id (fluid-hw jobs)")
    p.set_defaults(fn=_logs)

    p = sub.add_parser("cancel", help="stop a job (every rank; scancel under Slurm)")
    _common(p)
    p.add_argument("job", help="the job id")
    p.set_defaults(fn=_cancel)
