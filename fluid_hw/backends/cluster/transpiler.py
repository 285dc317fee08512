"""DistributeTranspiler: one local training program -> trainer and server programs.

Fluid's design, on Programs only (no frontend):

* **pserver mode.**  Every parameter that has an update op (``op_role="optimize"``,
  ``op_role_var=[param, grad]``) and its gradient are cut into the same row
  blocks (:mod:`.slicing`) and the blocks dispatched to servers.  The trainer
  program loses the update ops and the learning-rate schedule
  (``op_role="lr_sched"``) and gains ``split -> send -> send_barrier -> recv ->
  fetch_barrier -> concat``.  Each server program holds, per parameter block it
  owns, one optimize sub-block (in sync mode with several trainers it first
  sums the trainers' copies of the gradient block and scales by 1/trainers),
  the learning-rate schedule as one more sub-block, and a ``listen_and_serv``
  op.  Optimizer state shaped like the parameter is sliced with it; other
  state the update op writes (Adam's beta powers) gets one copy per block.
* **collective mode.**  No servers: the trainer program gets one fused
  ``c_allreduce_sum`` of every gradient before the first update op, then a
  ``scale`` by 1/trainers; every trainer keeps and updates all parameters.

Start-up: a server runs the *original* start-up program (so every random
initializer draws exactly what a single process draws) followed by ``split``
ops that cut the full variables into its blocks; trainers fetch the initial
parameters from the servers (pserver mode) or from trainer 0 (collective
mode), so all processes start from the same values -- and, on ``resume``, from
the last complete checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...ir.default_programs import default_main_program, default_startup_program
from ...ir.ops.distributed import STEP_VAR_NAME
from ...ir.ops.optimizer import OPTIMIZER_OPS
from ...ir.program import Block, Operator, Program, Variable, VarType
from .errors import TranspileError
from .slicing import VarBlock, block_name, get_dispatcher, slice_variable

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig"]

RPC_ROLE = "rpc"
MODES = ("pserver", "collective")


def _env(name: str) -> str:
    return os.environ.get(name, "")


@dataclass
class DistributeTranspilerConfig:
    """How to split.  ``None`` fields are read from the environment that
    ``fluid-hw launch`` sets (``FLUID_HW_CHECKPOINT_DIR``,
    ``FLUID_HW_CHECKPOINT_EVERY``, ``FLUID_HW_RESUME``), so a script gets
    checkpoints and ``--resume`` without code of its own."""

    #: cut parameters into row blocks across servers (False: one block each)
    slice_var_up: bool = True
    #: "RoundRobin" or "HashName"
    split_method: str = "RoundRobin"
    #: smallest block, in elements (Fluid's default 8192)
    min_block_size: int = 8192
    #: "pserver" or "collective"
    mode: str = "pserver"
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None
    resume: bool | None = None
    #: checkpoints kept per server
    keep_checkpoints: int = 2

    def resolved(self) -> tuple[str, int, bool]:
        d = self.checkpoint_dir if self.checkpoint_dir is not None else \
            _env("FLUID_HW_CHECKPOINT_DIR")
        if self.checkpoint_every is not None:
            every = self.checkpoint_every
        else:
            raw = _env("FLUID_HW_CHECKPOINT_EVERY") or "0"
            try:
                every = int(raw)
            except ValueError:
                raise TranspileError(f"FLUID_HW_CHECKPOINT_EVERY={raw!r} is not an "
                                     "integer") from None
        resume = self.resume if self.resume is not None else \
            _env("FLUID_HW_RESUME") not in ("", "0")
        if every < 0:
            raise TranspileError(f"checkpoint_every must be >= 0, got {every}")
        if resume and not d:
            raise TranspileError("resume needs a checkpoint_dir (or FLUID_HW_CHECKPOINT_DIR)")
        return d, every, resume


@dataclass
class _Pair:
    """One update op and what it updates."""

    op_index: int
    param: str
    grad: str
    prep: list[int] = field(default_factory=list)  # optimize-role ops it needs, in order


@dataclass
class _ServerPlan:
    """What one server holds, for its start-up program."""

    sliced: dict[str, list[VarBlock]] = field(default_factory=dict)  # full var -> blocks
    copies: dict[str, list[str]] = field(default_factory=dict)  # full var -> per-block copies


def _parse_endpoints(pservers: str | Sequence[str] | Sequence[int]) -> list[str]:
    if isinstance(pservers, str):
        eps = [e.strip() for e in pservers.split(",") if e.strip()]
    else:
        eps = [f"rank:{int(e)}" if not isinstance(e, str) else e.strip() for e in pservers]
    if len(set(eps)) != len(eps):
        raise TranspileError(f"pservers {eps} lists an endpoint twice")
    return eps


def _distributed_table(program: Program) -> tuple[bool, str | None]:
    """Whether ``program`` looks up a table with ``is_distributed=True``, and that
    table's name (Fluid's ``has_distributed_lookup_table`` / ``table_name``)."""
    tables = {op.input("W")[0] for op in program.global_block().ops
              if op.type == "lookup_table" and op.has_attr("is_distributed")
              and op.attr("is_distributed")}
    if len(tables) > 1:
        raise TranspileError(f"the program looks up {len(tables)} distributed tables "
                             f"{sorted(tables)}; Fluid's transpiler supports one")
    name = next(iter(tables), None)
    return name is not None, name


def _copy_var(block: Block, src: Variable, name: str | None = None,
              shape: Sequence[int] | None = None, persistable: bool | None = None) -> Variable:
    return block.create_var(
        name=name or src.name, shape=list(shape) if shape is not None else list(src.shape),
        dtype=src.dtype, type=src.type, lod_level=src.lod_level,
        persistable=src.persistable if persistable is None else persistable,
        stop_gradient=True)


def _copy_op(block: Block, op: Operator, rename: dict[str, str] | None = None,
             infer_shape: bool = True) -> Operator:
    rn = rename or {}
    ins = {s: [rn.get(n, n) for n in names] for s, names in op.inputs.items()}
    outs = {s: [rn.get(n, n) for n in names] for s, names in op.outputs.items()}
    attrs = op.all_attrs()
    if "op_role_var" in attrs:
        attrs["op_role_var"] = [rn.get(n, n) for n in attrs["op_role_var"]]
    return block.append_op(op.type, ins, outs, attrs, infer_shape=infer_shape)


def _role(op: Operator) -> str:
    return op.attr("op_role") if op.has_attr("op_role") else "forward"


class DistributeTranspiler:
    """Split a training program for a cluster (see the module docstring).

    ::

        t = DistributeTranspiler()
        t.transpile(trainer_id, program=main, pservers="h1:6174,h2:6174", trainers=2,
                    startup_program=startup)
        # on a server:
        ps = t.get_pserver_program(endpoint)
        exe.run(t.get_startup_program(endpoint, ps)); exe.run(ps)
        # on a trainer:
        exe.run(t.get_trainer_startup_program())
        for batch in ...: exe.run(t.get_trainer_program(), feed=..., fetch_list=[loss])
        exe.run(t.get_trainer_exit_program())
    """

    def __init__(self, config: DistributeTranspilerConfig | None = None) -> None:
        self.config = config or DistributeTranspilerConfig()
        self._done = False

    # -- analysis -------------------------------------------------------------
    def transpile(self, trainer_id: int, program: Program | None = None,
                  pservers: str | Sequence[str] | Sequence[int] = "127.0.0.1:6174",
                  trainers: int = 1, sync_mode: bool = True,
                  startup_program: Program | None = None,
                  current_endpoint: str = "127.0.0.1:6174") -> None:
        """Plan the split of ``program`` (default: the default main program).

        ``pservers``: ``"host:port,host:port"``, a list of endpoints, or a list of
        MPI ranks.  ``trainers``: how many trainers; ``trainer_id``: this one.
        ``sync_mode``: average the trainers' gradients each step (else every
        gradient is applied as it arrives).  ``current_endpoint`` is accepted for
        Fluid compatibility and unused (MPI ranks identify processes).
        """
        cfg = self.config
        if cfg.mode not in MODES:
            raise TranspileError(f"DistributeTranspilerConfig.mode is {cfg.mode!r}; use one "
                                 f"of {list(MODES)}")
        if not isinstance(trainers, int) or trainers < 1:
            raise TranspileError(f"trainers must be a positive integer, got {trainers!r}")
        if not 0 <= trainer_id < trainers:
            raise TranspileError(f"trainer_id {trainer_id} is out of range for {trainers} "
                                 f"trainer(s) (0..{trainers - 1})")
        if cfg.min_block_size < 1:
            raise TranspileError(f"min_block_size must be >= 1, got {cfg.min_block_size}")
        self.trainer_id = trainer_id
        self.trainers = trainers
        self.sync_mode = bool(sync_mode)
        self.mode = cfg.mode
        self.endpoints = _parse_endpoints(pservers) if cfg.mode == "pserver" else []
        if cfg.mode == "pserver" and not self.endpoints:
            raise TranspileError("pservers is empty; give 'host:port,...' or a list of ranks "
                                 "(or use mode='collective')")
        self.checkpoint_dir, self.checkpoint_every, self.resume = cfg.resolved()
        src = program if program is not None else default_main_program()
        st = startup_program if startup_program is not None else default_startup_program()
        self.has_distributed_lookup_table, self.table_name = _distributed_table(src)
        for prog in (src, st):  # as Fluid records them on the programs it was given
            prog._is_distributed = True
            prog._endpoints = list(self.endpoints)
            prog._ps_endpoint = current_endpoint
            prog._is_chief = trainer_id == 0
            prog._distributed_lookup_table = self.table_name
        self.origin_program = src.clone()
        self.origin_startup = st.clone()
        self._analyse()
        if self.mode == "pserver":
            self._plan_blocks()
        self._servers: dict[str, _ServerPlan] = {}
        self._done = True

    def _analyse(self) -> None:
        gb = self.origin_program.global_block()
        ops = gb.ops
        pairs: list[_Pair] = []
        for i, op in enumerate(ops):
            if _role(op) == "optimize" and op.type in OPTIMIZER_OPS:
                params, grads = op.input("Param"), op.input("Grad")
                if len(params) != 1 or len(grads) != 1:
                    raise TranspileError(f"update op #{i} ({op.type}) must have one Param and "
                                         "one Grad")
                pairs.append(_Pair(i, params[0], grads[0]))
        if not pairs:
            raise TranspileError("the program has no update ops (op_role='optimize'); call "
                                 "optimizer.minimize(loss) before transpiling")
        seen: set[str] = set()
        for p in pairs:
            if p.param in seen:
                raise TranspileError(f"parameter {p.param!r} is updated by two ops; the "
                                     "transpiler supports one optimizer per parameter")
            seen.add(p.param)
        protected = {p.param for p in pairs} | {p.grad for p in pairs}
        update_idx = {p.op_index for p in pairs}
        # the optimize-role helper ops (e.g. a per-parameter learning-rate scale) each
        # update op depends on; they may only read small (non-parameter) values
        writer: dict[str, int] = {}
        prep_of: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            if _role(op) == "optimize" and i not in update_idx:
                for n in op.output_arg_names:
                    writer[n] = i
            elif i in update_idx:
                needed: set[int] = set()
                todo = [n for n in op.input_arg_names if n in writer]
                while todo:
                    j = writer[todo.pop()]
                    if j in needed:
                        continue
                    needed.add(j)
                    todo += [n for n in ops[j].input_arg_names if n in writer]
                prep_of[i] = sorted(needed)
        for p in pairs:
            p.prep = prep_of.get(p.op_index, [])
            for j in p.prep:
                bad = set(ops[j].input_arg_names) & protected
                if bad and self.mode == "pserver":
                    raise TranspileError(
                        f"op #{j} ({ops[j].type}, op_role='optimize') reads {sorted(bad)}, "
                        "a whole parameter or gradient; servers hold only row blocks. Give "
                        "it op_role='backward' (so trainers run it) or use mode='collective'")
        self._pairs = pairs
        self._lr_ops = [i for i, op in enumerate(ops) if _role(op) == "lr_sched"]
        self._removed = sorted(update_idx | {j for p in pairs for j in p.prep}
                               | set(self._lr_ops))
        for p in pairs if self.mode == "pserver" else ():
            for n in (p.param, p.grad):
                v = gb._find_var_recursive(n)
                if v is None or not v.shape or any(d <= 0 for d in v.shape):
                    raise TranspileError(f"variable {n!r} needs a fixed shape to be sent "
                                         f"between processes, has {list(v.shape) if v else '?'}")

    def _plan_blocks(self) -> None:
        gb = self.origin_program.global_block()
        cfg = self.config
        count = len(self.endpoints) if cfg.slice_var_up else 1
        disp = get_dispatcher(cfg.split_method, self.endpoints)
        self._param_blocks: dict[str, list[VarBlock]] = {}
        self._grad_blocks: dict[str, list[VarBlock]] = {}
        self._block_ep: dict[str, str] = {}
        for p in self._pairs:
            shape = gb.var(p.param).shape
            pbs = slice_variable(p.param, shape, count, cfg.min_block_size)
            gbs = [VarBlock(p.grad, b.index, b.count, b.offset, b.rows, b.shape) for b in pbs]
            self._param_blocks[p.param] = pbs
            self._grad_blocks[p.grad] = gbs
            for b, ep in zip(pbs, disp.dispatch(pbs)):
                self._block_ep[b.name] = ep

    def _check(self) -> None:
        if not self._done:
            raise TranspileError("call transpile(...) first")

    def _need_pserver(self, what: str) -> None:
        self._check()
        if self.mode != "pserver":
            raise TranspileError(f"{what} exists in pserver mode only; this transpiler is in "
                                 f"{self.mode!r} mode")

    @property
    def placement(self) -> dict[str, list[str]]:
        """Endpoint -> the parameter blocks it holds (pserver mode)."""
        self._need_pserver("placement")
        out: dict[str, list[str]] = {ep: [] for ep in self.endpoints}
        for name, ep in self._block_ep.items():
            out[ep].append(name)
        return out

    # -- trainer side ---------------------------------------------------------
    def _rpc(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"endpoints": self.endpoints, "trainer_id": self.trainer_id,
                "op_role": RPC_ROLE, **(extra or {})}

    def _step_var(self, block: Block) -> Variable:
        return block.create_var(name=STEP_VAR_NAME, shape=[1], dtype="int64", persistable=True,
                                stop_gradient=True)

    def _declare_blocks(self, block: Block, full: str, blocks: list[VarBlock]) -> list[str]:
        src = self.origin_program.global_block().var(full)
        if len(blocks) > 1:
            for b in blocks:
                _copy_var(block, src, b.name, b.shape, persistable=False)
        return [b.name for b in blocks]

    def _append_fetch(self, block: Block, with_step: bool) -> None:
        """recv every parameter block (one op), fetch_barrier, concat."""
        names, eps = [], []
        for p in self._pairs:
            blocks = self._param_blocks[p.param]
            names += self._declare_blocks(block, p.param, blocks)
            eps += [self._block_ep[b.name] for b in blocks]
        outs: dict[str, Any] = {"Out": names}
        if with_step:
            outs["Step"] = self._step_var(block)
        block.append_op("recv", {}, outs, self._rpc({"epmap": eps}))
        if self.sync_mode:
            block.append_op("fetch_barrier", {}, {}, self._rpc())
        for p in self._pairs:
            blocks = self._param_blocks[p.param]
            if len(blocks) > 1:
                block.append_op("concat", {"X": [b.name for b in blocks]}, {"Out": p.param},
                                {"axis": 0, "op_role": RPC_ROLE})

    def get_trainer_program(self, wait_port: bool = True) -> Program:
        """The trainer's main program (run it once per step)."""
        self._check()
        prog = self.origin_program.clone()
        gb = prog.global_block()
        if self.mode == "collective":
            return self._collective_trainer(prog)
        for i in reversed(self._removed):
            gb._remove_op(i)
        step = self._step_var(gb)
        names, eps = [], []
        for p in self._pairs:
            blocks = self._grad_blocks[p.grad]
            bn = self._declare_blocks(gb, p.grad, blocks)
            if len(blocks) > 1:
                gb.append_op("split", {"X": p.grad}, {"Out": bn},
                             {"axis": 0, "sections": [b.rows for b in blocks],
                              "op_role": RPC_ROLE})
            names += bn
            eps += [self._block_ep[pb.name] for pb in self._param_blocks[p.param]]
        gb.append_op("send", {"X": names, "Step": step}, {}, self._rpc({"epmap": eps}))
        if self.sync_mode:
            gb.append_op("send_barrier", {}, {}, self._rpc())
        self._append_fetch(gb, with_step=False)
        gb.append_op("increment", {"X": step}, {"Out": step}, {"step": 1.0, "op_role": RPC_ROLE})
        return prog

    def get_trainer_startup_program(self) -> Program:
        """The original start-up program, then: fetch the initial (or resumed)
        parameters from the servers (pserver mode), or take trainer 0's values and
        its resumed checkpoint (collective mode).  Sets ``@CLUSTER_STEP@``, the step
        to start at (see :func:`fluid_hw.backends.cluster.start_step`)."""
        self._check()
        prog = self.origin_startup.clone()
        sb = prog.global_block()
        if self.mode == "collective":
            return self._collective_startup(prog)
        self._append_fetch(sb, with_step=True)
        return prog

    def get_trainer_exit_program(self) -> Program:
        """Run once after the last step: tells the servers this trainer is done
        (pserver mode) or writes the final checkpoint (collective mode)."""
        self._check()
        prog = Program()
        gb = prog.global_block()
        if self.mode == "collective":
            if self.checkpoint_dir:
                xs = self._collective_state(gb)
                gb.append_op("checkpoint_save", {"X": xs, "Step": self._step_var(gb)}, {},
                             self._ckpt_attrs(every=0))
            return prog
        gb.append_op("send_complete", {}, {}, self._rpc())
        return prog

    # -- collective ---------------------------------------------------------------
    def _ckpt_attrs(self, every: int) -> dict[str, Any]:
        return {"checkpoint_dir": os.path.join(self.checkpoint_dir, "trainer"),
                "checkpoint_every": every, "root": 0, "keep": self.config.keep_checkpoints,
                "op_role": RPC_ROLE}

    def _collective_state(self, block: Block) -> list[str]:
        """Persistable variables the start-up program initialises: what trainers
        must agree on (parameters, optimizer state, learning-rate counters)."""
        init = {n for op in self.origin_startup.global_block().ops for n in op.output_arg_names}
        gb = self.origin_program.global_block()
        names = [v.name for v in gb.vars.values()
                 if v.persistable and v.type == VarType.LOD_TENSOR and v.name in init
                 and v.name != STEP_VAR_NAME]
        for n in names:
            if not block.has_var(n):
                _copy_var(block, gb.var(n))
        return names

    def _collective_trainer(self, prog: Program) -> Program:
        gb = prog.global_block()
        first = min(p.op_index for p in self._pairs)
        first = min([first, *(j for p in self._pairs for j in p.prep)])
        grads = [p.grad for p in self._pairs]
        gb._insert_op(first, "c_allreduce_sum", {"X": grads}, {"Out": grads},
                      {"op_role": "backward"})
        if self.trainers > 1:
            for k, g in enumerate(grads):
                gb._insert_op(first + 1 + k, "scale", {"X": g}, {"Out": g},
                              {"scale": 1.0 / self.trainers, "op_role": "backward"})
        step = self._step_var(gb)
        gb.append_op("increment", {"X": step}, {"Out": step}, {"step": 1.0, "op_role": RPC_ROLE})
        if self.checkpoint_dir and self.checkpoint_every > 0:
            gb.append_op("checkpoint_save", {"X": self._collective_state(gb), "Step": step}, {},
                         self._ckpt_attrs(self.checkpoint_every))
        return prog

    def _collective_startup(self, prog: Program) -> Program:
        sb = prog.global_block()
        step = self._step_var(sb)
        sb.append_op("fill_constant", {}, {"Out": step},
                     {"shape": [1], "dtype": step.dtype, "value": 0.0})
        xs = self._collective_state(sb)
        if self.checkpoint_dir:
            sb.append_op("checkpoint_load", {}, {"Out": xs, "Step": step},
                         {"checkpoint_dir": os.path.join(self.checkpoint_dir, "trainer"),
                          "root": 0, "resume": self.resume, "op_role": RPC_ROLE})
        sb.append_op("c_broadcast", {"X": [*xs, step.name]}, {"Out": [*xs, step.name]},
                     {"root": 0, "op_role": RPC_ROLE})
        return prog

    # -- server side ----------------------------------------------------------------
    def get_pserver_program(self, endpoint: str) -> Program:
        """The program of the server at ``endpoint``: its parameter blocks, one
        optimize sub-block each, the learning-rate sub-block and ``listen_and_serv``."""
        self._need_pserver("get_pserver_program")
        if endpoint not in self.endpoints:
            raise TranspileError(f"endpoint {endpoint!r} is not one of the pservers "
                                 f"{self.endpoints}")
        og = self.origin_program.global_block()
        ops = og.ops
        plan = _ServerPlan()
        ps = Program()
        ps.random_seed = self.origin_program.random_seed
        gb = ps.global_block()

        def declare(name: str) -> None:
            if not gb.has_var(name):
                _copy_var(gb, og._var_recursive(name))

        lr_idx = -1
        if self._lr_ops:
            for i in self._lr_ops:
                for n in ops[i].input_arg_names + ops[i].output_arg_names:
                    declare(n)
            blk = ps._create_block(0)
            for i in self._lr_ops:
                _copy_op(blk, ops[i])
            ps._rollback()
            lr_idx = blk.idx
        opt_blocks: list[int] = []
        grad_map: list[str] = []
        params: list[str] = []
        recv_vars: list[str] = []
        multi = self.sync_mode and self.trainers > 1
        for p in self._pairs:
            pbs, gbs = self._param_blocks[p.param], self._grad_blocks[p.grad]
            upd = ops[p.op_index]
            pvar = og.var(p.param)
            for pb_, gb_ in zip(pbs, gbs):
                if self._block_ep[pb_.name] != endpoint:
                    continue
                rename = self._block_rename(p, pb_, gb_, upd, plan)
                for full, new in rename.items():
                    src = og._var_recursive(full)
                    shape = pb_.shape if list(src.shape) == list(pvar.shape) else src.shape
                    if not gb.has_var(new):
                        _copy_var(gb, src, new, shape,
                                  persistable=False if full == p.grad else None)
                for j in p.prep:
                    for n in ops[j].input_arg_names + ops[j].output_arg_names:
                        declare(n)
                for n in upd.input_arg_names + upd.output_arg_names:
                    if n not in rename:
                        declare(n)
                blk = ps._create_block(0)
                gname = gb_.name
                if multi:
                    copies = [f"{gname}.trainer_{t}" for t in range(self.trainers)]
                    for c in copies:
                        _copy_var(gb, gb.var(gname), c, persistable=False)
                    blk.append_op("sum", {"X": copies}, {"Out": gname})
                    blk.append_op("scale", {"X": gname}, {"Out": gname},
                                  {"scale": 1.0 / self.trainers})
                    recv_vars += copies
                else:
                    recv_vars.append(gname)
                for j in p.prep:
                    _copy_op(blk, ops[j])
                _copy_op(blk, upd, rename)
                ps._rollback()
                opt_blocks.append(blk.idx)
                grad_map.append(f"{gname}:{blk.idx}")
                params.append(pb_.name)
        gb.append_op("listen_and_serv", {"X": recv_vars}, {}, {
            "endpoint": endpoint, "endpoints": self.endpoints, "Fanin": self.trainers,
            "sync_mode": self.sync_mode, "optimize_blocks": opt_blocks,
            "grad_to_block_id": grad_map, "param_names": params, "lr_decay_block_id": lr_idx,
            "checkpoint_dir": (os.path.join(self.checkpoint_dir,
                                            f"pserver_{self.endpoints.index(endpoint)}")
                               if self.checkpoint_dir else ""),
            "checkpoint_every": self.checkpoint_every,
            "checkpoint_keep": self.config.keep_checkpoints, "resume": self.resume,
            "op_role": RPC_ROLE})
        self._servers[endpoint] = plan
        return ps

    def _block_rename(self, p: _Pair, pb_: VarBlock, gb_: VarBlock, upd: Operator,
                      plan: _ServerPlan) -> dict[str, str]:
        """Names the update op uses for parameter block ``pb_``: the parameter, its
        gradient and its same-shaped state become blocks; other state it writes
        (a beta power) gets one copy per block; read-only inputs keep their name."""
        og = self.origin_program.global_block()
        pshape = list(og.var(p.param).shape)
        rename = {p.param: pb_.name, p.grad: gb_.name}
        blocks = self._param_blocks[p.param]
        if pb_.count > 1:
            plan.sliced[p.param] = blocks
        written = set(upd.output_arg_names)
        for n in upd.input_arg_names + upd.output_arg_names:
            if n in rename:
                continue
            v = og._var_recursive(n)
            if v.persistable and list(v.shape) == pshape:
                rename[n] = block_name(n, pb_.index) if pb_.count > 1 else n
                if pb_.count > 1:
                    plan.sliced[n] = [VarBlock(n, b.index, b.count, b.offset, b.rows, b.shape)
                                      for b in blocks]
            elif n in written and pb_.count > 1:
                rename[n] = block_name(n, pb_.index)
                plan.copies.setdefault(n, [])
                if rename[n] not in plan.copies[n]:
                    plan.copies[n].append(rename[n])
        return rename

    def get_startup_program(self, endpoint: str, pserver_program: Program | None = None
                            ) -> Program:
        """The server's start-up program: the original one (the same random
        draws as a single process), then ``split``/``assign`` into its blocks."""
        self._need_pserver("get_startup_program")
        if endpoint not in self._servers:
            self.get_pserver_program(endpoint)
        plan = self._servers[endpoint]
        prog = self.origin_startup.clone()
        sb = prog.global_block()
        og = self.origin_program.global_block()
        init = {n for op in sb.ops for n in op.output_arg_names}
        wanted = set(plan.sliced) | set(plan.copies)
        if pserver_program is not None:
            wanted |= {v.name for v in pserver_program.global_block().vars.values()
                       if v.persistable and v.name in og.vars and og.var(v.name).persistable}
        for n in sorted(wanted):
            if n not in init:
                raise TranspileError(f"server {endpoint!r} holds {n!r}, which the start-up "
                                     "program never initialises; pass the startup_program "
                                     "the model was built with to transpile()")
        for full, blocks in plan.sliced.items():
            src = og.var(full)
            if not sb.has_var(full):
                _copy_var(sb, src)
            for b in blocks:
                _copy_var(sb, src, b.name, b.shape, persistable=True)
            sb.append_op("split", {"X": full}, {"Out": [b.name for b in blocks]},
                         {"axis": 0, "sections": [b.rows for b in blocks]})
        for full, names in plan.copies.items():
            src = og._var_recursive(full)
            for c in names:
                _copy_var(sb, src, c, persistable=True)
                sb.append_op("assign", {"X": full}, {"Out": c})
        return prog
