"""The pieces without MPI: wire format, slicing, checkpoints, roles, the launcher's plumbing."""

import zlib

import numpy as np
import pytest

from fluid_hw.backends.cluster import checkpoint
from fluid_hw.backends.cluster.comm import endpoint_rank, trainer_ranks
from fluid_hw.backends.cluster.errors import ClusterError, LaunchError, TranspileError, WireError
from fluid_hw.backends.cluster.launch import LaunchSpec, job_env, mpiexec_command, srun_command
from fluid_hw.backends.cluster.role import ClusterRole, start_step
from fluid_hw.backends.cluster.run_rank import PrefixedLines
from fluid_hw.backends.cluster.slicing import HashName, RoundRobin, slice_variable
from fluid_hw.backends.cluster.wire import Kind, decode, encode
from fluid_hw.errors import FluidError
from fluid_hw.ir.ops.distributed import STEP_VAR_NAME
from fluid_hw.ir.scope import Scope

# -- wire ---------------------------------------------------------------------------

@pytest.mark.parametrize("arr", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 5), np.float64),
    np.array(7, np.int64), np.arange(6, dtype=np.int32).reshape(1, 2, 3),
    np.array([True, False]), np.arange(5, dtype=np.float16),
])
def test_wire_round_trip(arr):
    buf = encode(Kind.GRAD, "fc_0.w_0@GRAD.block1", arr, trainer_id=3, step=41)
    assert buf.dtype == np.uint8 and (buf.nbytes - arr.nbytes) % 8 == 0  # aligned payload
    m = decode(buf)
    assert (m.kind, m.name, m.trainer_id, m.step) == (Kind.GRAD, "fc_0.w_0@GRAD.block1", 3, 41)
    assert m.array.dtype == arr.dtype and m.array.shape == arr.shape
    np.testing.assert_array_equal(m.array, arr)
    assert arr.size == 0 or np.shares_memory(m.array, buf)  # no copy on receive


def test_wire_header_only_message():
    m = decode(encode(Kind.SEND_BARRIER, trainer_id=1))
    assert m.kind == Kind.SEND_BARRIER and m.array is None and m.name == ""


def test_wire_non_contiguous_input_is_sent_by_value():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    np.testing.assert_array_equal(decode(encode(Kind.PARAM, "x", a)).array, a)


@pytest.mark.parametrize(("mangle", "match"), [
    (lambda b: b[:10], "shorter than"),
    (lambda b: np.concatenate([b[:4] * 0, b[4:]]), "not a fluid-hw message"),
    (lambda b: b[:-4], "truncated"),
    (lambda b: np.concatenate([b[:4], np.array([99], np.uint8), b[5:]]), "unknown kind"),
])
def test_wire_rejects_bad_messages(mangle, match):
    buf = encode(Kind.PARAM, "w", np.ones((2, 3), np.float32))
    with pytest.raises(WireError, match=match):
        decode(mangle(buf.copy()), "rank 5")


def test_wire_rejects_unsupported_dtypes_and_long_names():
    with pytest.raises(WireError, match="dtype complex64"):
        encode(Kind.GRAD, "c", np.zeros(2, np.complex64))
    with pytest.raises(WireError, match="bytes"):
        encode(Kind.GET, "x" * 2000)
    assert issubclass(WireError, FluidError)


# -- slicing ------------------------------------------------------------------------

def test_slicing_follows_fluid_rule():
    blocks = slice_variable("w", [64, 128], slice_count=2, min_block_size=1024)
    assert [(b.name, b.offset, b.rows, b.shape) for b in blocks] == [
        ("w.block0", 0, 32, (32, 128)), ("w.block1", 32, 32, (32, 128))]
    # too small to split: one block keeping the variable's own name
    (b,) = slice_variable("b", [128], slice_count=2, min_block_size=1024)
    assert b.name == "b" and b.rows == 128
    # whole rows: 10 rows over 3 servers -> 4 + 4 + 2
    blocks = slice_variable("v", [10, 100], slice_count=3, min_block_size=1)
    assert [b.rows for b in blocks] == [4, 4, 2]
    # min_block_size caps the count
    assert len(slice_variable("v", [10, 100], slice_count=8, min_block_size=300)) == 3


def test_slicing_errors():
    with pytest.raises(TranspileError, match="fixed"):
        slice_variable("x", [-1, 4], 2, 1)
    with pytest.raises(TranspileError, match=">= 1"):
        slice_variable("x", [4, 4], 0, 1)


def test_dispatchers():
    blocks = slice_variable("w", [8, 4], 4, 1)
    assert RoundRobin(["a", "b", "c"]).dispatch(blocks) == ["a", "b", "c", "a"]
    got = HashName(["a", "b"]).dispatch(blocks)
    assert got == [["a", "b"][zlib.crc32(b.name.encode()) % 2] for b in blocks]


# -- layout and roles ---------------------------------------------------------------

def test_endpoints_map_to_ranks():
    eps = ["h:1", "h:2"]
    assert [endpoint_rank(e, eps) for e in eps] == [0, 1]
    assert endpoint_rank("rank:5", eps) == 5
    assert trainer_ranks(eps, 2, 4) == [2, 3]
    assert trainer_ranks(["rank:3", "rank:0"], 2, 4) == [1, 2]
    with pytest.raises(ClusterError, match="mpiexec -n 5"):
        trainer_ranks(eps, 3, 4)
    with pytest.raises(ClusterError, match="not one of"):
        endpoint_rank("x:1", eps)


def test_role_from_env():
    env = {"FLUID_HW_MODE": "sync", "FLUID_HW_PSERVERS": "2", "FLUID_HW_TRAINERS": "2"}
    r = [ClusterRole.from_env(env, rank=i, world_size=4) for i in range(4)]
    assert [x.label for x in r] == ["pserver 0", "pserver 1", "trainer 0", "trainer 1"]
    assert r[1].endpoint == "rank:1" and r[3].trainer_id == 1 and r[3].sync_mode
    c = ClusterRole.from_env({"FLUID_HW_MODE": "collective", "FLUID_HW_TRAINERS": "3"},
                             rank=2, world_size=3)
    assert c.is_trainer and c.trainer_id == 2 and c.transpiler_mode == "collective"
    assert ClusterRole.from_env({}).is_local
    with pytest.raises(ClusterError, match="mpiexec -n 4"):
        ClusterRole.from_env(env, rank=0, world_size=3)
    with pytest.raises(ClusterError, match="FLUID_HW_MODE"):
        ClusterRole.from_env({"FLUID_HW_MODE": "ring"}, rank=0, world_size=1)
    with pytest.raises(ClusterError, match="FLUID_HW_PSERVERS"):
        ClusterRole.from_env({"FLUID_HW_MODE": "async"}, rank=0, world_size=1)


def test_start_step_reads_the_step_variable():
    s = Scope()
    assert start_step(s) == 0
    s.vars[STEP_VAR_NAME] = np.array([30], np.int64)
    assert start_step(s) == 30


# -- checkpoints --------------------------------------------------------------------

def test_checkpoints_are_atomic_and_pruned(tmp_path):
    d = tmp_path / "ps0"
    for step in (10, 20, 30):
        checkpoint.save(d, step, {"w.block0": np.full((2, 2), step, np.float32)}, [step, step])
    assert checkpoint.steps(d) == [20, 30]
    (d / ".step_00000040.npz.abc.tmp").write_bytes(b"half")  # a save killed mid-write
    assert checkpoint.latest(d) == 30
    arrays, ts = checkpoint.load(d, 30)
    assert ts == [30, 30] and arrays["w.block0"][0, 0] == 30
    checkpoint.save(d, 40, {"w.block0": np.zeros((2, 2), np.float32)}, [40, 40])
    assert not list(d.glob("*.tmp"))
    # a new run saving step 10 drops the old run's later steps
    checkpoint.save(d, 10, {"w.block0": np.zeros((2, 2), np.float32)}, [10, 10])
    assert checkpoint.steps(d) == [10]
    assert checkpoint.clear(d) == 1 and checkpoint.steps(d) == []


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    checkpoint.path_for(tmp_path, 5).write_bytes(b"not a zip")
    with pytest.raises(ClusterError, match="not a valid checkpoint"):
        checkpoint.load(tmp_path, 5)
    with pytest.raises(ClusterError, match="not found"):
        checkpoint.load(tmp_path, 6)


# -- launcher plumbing --------------------------------------------------------------

def test_launch_command_and_environment(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("")
    spec = LaunchSpec(str(script), ["--steps", "3"], pservers=2, trainers=3, mode="async",
                      checkpoint_dir=str(tmp_path / "ck"), hosts="a,b")
    env = job_env(spec, resume=True, job_id="j")
    assert env["FLUID_HW_RESUME"] == "1" and env["FLUID_HW_PSERVERS"] == "2"
    cmd = mpiexec_command(spec, env)
    assert cmd[1:3] == ["-n", "5"] and "-hosts" in cmd and cmd[-2:] == ["--steps", "3"]
    assert "srun -n 5 --mpi=pmi2" in srun_command(spec)
    with pytest.raises(LaunchError, match="--mode"):
        LaunchSpec(str(script), mode="ring").check()
    with pytest.raises(LaunchError, match="--trainers"):
        LaunchSpec(str(script), trainers=0).check()


def test_prefixed_lines_write_whole_lines():
    class Sink:
        def __init__(self):
            self.writes = []

        def write(self, s):
            self.writes.append(s)

        def flush(self):
            pass

    sink = Sink()
    out = PrefixedLines(sink, "[trainer 1] ")
    out.write("step 1")
    out.write(" loss 2\nstep 2\n")
    out.write("tail")
    out.flush()
    assert sink.writes == ["[trainer 1] step 1 loss 2\n[trainer 1] step 2\n",
                           "[trainer 1] tail\n"]


# -- resume checks dtypes strictly ------------------------------------------------------

def _server_and_checkpoint(tmp_path, mode="pserver"):
    """A transpiled digits MLP whose checkpoint (step 10) holds the start-up values."""
    import fluid_hw as fluid
    from fluid_hw.backends.cluster import DistributeTranspiler, DistributeTranspilerConfig
    from fluid_hw.frontend import models

    m = models.digits_mlp(hidden=(16,), optimizer=fluid.optimizer.Momentum(
        learning_rate=0.1, momentum=0.9))
    t = DistributeTranspiler(DistributeTranspilerConfig(
        mode=mode, checkpoint_dir=str(tmp_path), resume=True, min_block_size=64))
    t.transpile(0, program=m.main, pservers="rank:0", trainers=1, startup_program=m.startup)
    return t, m


class _OneServer:
    """What ParameterServer._resume needs of Comm when it is the only server."""

    rank, size = 0, 2

    def wait(self, reqs, what):
        assert not reqs


@pytest.mark.parametrize("wrong", ["int32", "float64"])
def test_pserver_resume_refuses_a_member_of_another_dtype(tmp_path, wrong):
    import fluid_hw as fluid
    from fluid_hw.backends.cluster.pserver import ParameterServer
    from fluid_hw.backends.cpu.context import KernelContext

    t, _ = _server_and_checkpoint(tmp_path)
    ps = t.get_pserver_program("rank:0")
    scope = Scope()
    exe = fluid.Executor()
    exe.run(t.get_startup_program("rank:0", ps), scope=scope)
    op = ps.global_block().ops[-1]
    assert op.type == "listen_and_serv"
    ctx = KernelContext(op, len(ps.global_block().ops) - 1, exe)
    ctx.scope = scope
    server = ParameterServer(ctx, comm=_OneServer())
    arrays = {n: np.asarray(scope.find_value(n)) for n in server.state}
    d = op.attr("checkpoint_dir")
    checkpoint.save(d, 10, arrays, [10])
    server._resume()  # the values it saved: fine
    assert server.round == 10
    name = next(n for n in server.state if arrays[n].dtype == np.float32 and arrays[n].ndim == 2)
    arrays[name] = arrays[name].astype(wrong)
    checkpoint.save(d, 20, arrays, [20])
    path = checkpoint.path_for(d, 20)
    with pytest.raises(ClusterError, match=rf"{path}: member '{name}' has dtype {wrong}, the "
                                           r"program declares float32"):
        server._resume()


def test_collective_resume_refuses_a_member_of_another_dtype(tmp_path, monkeypatch):
    from fluid_hw.backends.cluster import kernels
    from fluid_hw.backends.cpu.context import KernelContext

    t, _ = _server_and_checkpoint(tmp_path, mode="collective")
    st = t.get_trainer_startup_program()
    blocks = [st.block(i) for i in range(st.num_blocks)]
    op = next(o for b in blocks for o in b.ops if o.type == "checkpoint_load")
    names = op.outputs["Out"]
    arrays = {}
    for n in names:
        v = op.block._find_var_recursive(n)
        arrays[n] = np.zeros(v.shape, np.dtype(v.dtype_name))
    d = op.attr("checkpoint_dir")
    monkeypatch.setattr(kernels, "get_comm", lambda: _OneServer())

    def load():
        ctx = KernelContext(op, 0, None)
        ctx.scope = Scope()
        kernels.checkpoint_load(ctx)
        return ctx.scope

    checkpoint.save(d, 10, arrays, [10])
    assert int(load().vars[STEP_VAR_NAME][0]) == 10
    name = next(n for n in names if arrays[n].dtype == np.float32 and arrays[n].ndim == 2)
    arrays[name] = arrays[name].astype(np.int32)
    checkpoint.save(d, 20, arrays, [20])
    with pytest.raises(ClusterError, match=rf"member '{name}' has dtype int32, the program "
                                           r"declares float32"):
        load()
