"""DistributeTranspiler: program structure, and server blocks that compute the local update.

No MPI here: the servers' optimize sub-blocks are run in-process on gradients
computed by the local program, and must give the rows of the local update.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cluster import DistributeTranspiler, DistributeTranspilerConfig
from fluid_hw.backends.cluster.errors import TranspileError
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.ir.grad import GradMaker
from fluid_hw.ir.ops.distributed import DISTRIBUTED_OPS, STEP_VAR_NAME
from fluid_hw.ir.registry import get_op
from fluid_hw.ir.verifier import verify_program
from fluid_hw.transpiler import DistributeTranspiler as ShimTranspiler

EPS = "127.0.0.1:6170,127.0.0.1:6171"


def _types(p):
    return [op.type for op in p.global_block().ops]


def _mlp(opt=None, lr=0.05, **kw):
    return models.digits_mlp(hidden=(32,), optimizer=opt or fluid.optimizer.Momentum(
        learning_rate=lr, momentum=0.9), **kw)


def _transpile(m, trainers=2, sync=True, **cfg):
    cfg.setdefault("min_block_size", 256)
    cfg.setdefault("checkpoint_dir", "")
    t = DistributeTranspiler(DistributeTranspilerConfig(**cfg))
    t.transpile(0, program=m.main, pservers=EPS, trainers=trainers, sync_mode=sync,
                startup_program=m.startup)
    return t


def test_shim_reexports_the_cluster_transpiler():
    assert ShimTranspiler is DistributeTranspiler


def test_distributed_ops_are_io_ops_without_gradients():
    for t in DISTRIBUTED_OPS:
        g = get_op(t).grad
        assert g is not None and not isinstance(g, GradMaker) and g.reason == "io", t


def test_trainer_program_sends_gradients_and_fetches_parameters():
    m = _mlp()
    t = _transpile(m)
    tp = t.get_trainer_program()
    verify_program(tp)
    types = _types(tp)
    assert "momentum" not in types
    i = types.index
    assert i("split") < i("send") < i("send_barrier") < i("recv") < i("fetch_barrier") \
        < i("concat")
    assert types[-1] == "increment"
    send = tp.global_block().ops[i("send")]
    # fc_0.w_0 is 64x32 = 2048 elements >= 2 * 256: cut into two row blocks
    assert "fc_0.w_0@GRAD.block0" in send.input("X") and "fc_0.w_0@GRAD.block1" in send.input("X")
    assert set(send.attr("epmap")) == set(EPS.split(","))
    # the original program is untouched
    assert "momentum" in _types(m.main) and "send" not in _types(m.main)


def test_every_block_lives_on_exactly_one_server():
    m = _mlp()
    t = _transpile(m)
    held = [b for blocks in t.placement.values() for b in blocks]
    assert sorted(held) == sorted(set(held))
    assert {"fc_0.w_0.block0", "fc_0.w_0.block1", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"} == set(held)
    for ep in EPS.split(","):
        ps = t.get_pserver_program(ep)
        verify_program(ps)
        ls = ps.global_block().ops[-1]
        assert ls.type == "listen_and_serv"
        assert len(ls.attr("optimize_blocks")) == len(t.placement[ep])
        assert ls.attr("Fanin") == 2 and ls.attr("sync_mode")
        st = t.get_startup_program(ep, ps)
        verify_program(st)


def test_sync_server_averages_the_trainers_gradients():
    m = _mlp()
    ps = _transpile(m, trainers=3).get_pserver_program(EPS.split(",")[0])
    blk = ps.block(1)
    assert [op.type for op in blk.ops] == ["sum", "scale", "momentum"]
    assert len(blk.ops[0].input("X")) == 3
    assert blk.ops[1].attr("scale") == pytest.approx(1 / 3)


def test_async_has_no_barriers_and_no_averaging():
    m = _mlp()
    t = _transpile(m, sync=False)
    types = _types(t.get_trainer_program())
    assert "send_barrier" not in types and "fetch_barrier" not in types
    ps = t.get_pserver_program(EPS.split(",")[0])
    assert [op.type for op in ps.block(1).ops] == ["momentum"]
    assert not ps.global_block().ops[-1].attr("sync_mode")


def test_hash_name_dispatch_is_stable():
    m = _mlp()
    a = _transpile(m, split_method="HashName").placement
    b = _transpile(_mlp(), split_method="HashName").placement
    assert a == b


def test_collective_mode_all_reduces_before_the_updates():
    m = _mlp()
    t = _transpile(m, mode="collective", trainers=4)
    tp = t.get_trainer_program()
    verify_program(tp)
    types = _types(tp)
    assert "send" not in types and "recv" not in types
    ar = types.index("c_allreduce_sum")
    assert ar < types.index("momentum")
    assert types[ar + 1:ar + 5] == ["scale"] * 4
    st = t.get_trainer_startup_program()
    assert _types(st)[-1] == "c_broadcast"
    with pytest.raises(TranspileError, match="pserver mode only"):
        t.get_pserver_program(EPS.split(",")[0])


def test_checkpoint_settings_reach_the_programs(tmp_path):
    m = _mlp()
    t = _transpile(m, checkpoint_dir=str(tmp_path), checkpoint_every=5, resume=True)
    ls = t.get_pserver_program(EPS.split(",")[1]).global_block().ops[-1]
    assert ls.attr("checkpoint_dir").endswith("pserver_1") and ls.attr("checkpoint_every") == 5
    assert ls.attr("resume")
    c = _transpile(_mlp(), mode="collective", checkpoint_dir=str(tmp_path), checkpoint_every=5,
                   resume=True)
    assert "checkpoint_save" in _types(c.get_trainer_program())
    assert "checkpoint_load" in _types(c.get_trainer_startup_program())


@pytest.mark.parametrize(("kw", "match"), [
    ({"trainer_id": 2}, "out of range"),
    ({"pservers": ""}, "pservers is empty"),
    ({"pservers": "a:1,a:1"}, "twice"),
    ({"trainers": 0}, "positive"),
])
def test_bad_transpile_arguments(kw, match):
    m = _mlp()
    args = {"trainer_id": 0, "program": m.main, "pservers": EPS, "trainers": 2,
            "startup_program": m.startup, **kw}
    with pytest.raises(TranspileError, match=match):
        DistributeTranspiler().transpile(**args)


def test_bad_config_and_endpoint():
    with pytest.raises(TranspileError, match="split_method"):
        _transpile(_mlp(), split_method="Random")
    with pytest.raises(TranspileError, match="mode"):
        _transpile(_mlp(), mode="nccl")
    t = _transpile(_mlp())
    with pytest.raises(TranspileError, match="not one of the pservers"):
        t.get_pserver_program("10.0.0.1:1")
    with pytest.raises(TranspileError, match="transpile"):
        DistributeTranspiler().get_trainer_program()


def test_a_program_without_updates_is_refused():
    m = models.digits_mlp(hidden=(8,))
    with pytest.raises(TranspileError, match="minimize"):
        DistributeTranspiler().transpile(0, program=m.main, pservers=EPS,
                                         startup_program=m.startup)


def test_optimize_op_reading_a_whole_parameter_is_refused():
    """A helper op of an update that reads the full parameter cannot run on a server."""
    m = _mlp()
    gb = m.main.global_block()
    upd = next(op for op in gb.ops if op.type == "momentum" and
               op.input("Param") == ["fc_0.w_0"])
    tmp = gb.create_var(name="w_copy", shape=[64, 32], dtype="float32")
    gb._insert_op(upd.idx, "assign", {"X": "fc_0.w_0"}, {"Out": tmp}, {"op_role": "optimize"})
    upd.set_input("Velocity", ["w_copy"])
    with pytest.raises(TranspileError, match="row blocks"):
        _transpile(m)
    _transpile(m, mode="collective")  # fine when every trainer holds everything


# -- the servers' blocks compute the local update ----------------------------------

def _grads_and_update(m, feeds, steps):
    """Gradients of each step and the parameters after, from the local program."""
    params = [p.name for p in m.main.all_parameters()]
    pairs = [(op.input("Param")[0], op.input("Grad")[0]) for op in m.main.global_block().ops
             if op.has_attr("op_role") and op.attr("op_role") == "optimize"
             and op.has_attr("op_role_var")]
    exe = fluid.Executor()
    scope = fluid.Scope()
    grads = []
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        for feed in feeds[:steps]:
            vals = exe.run(m.main, feed=feed, fetch_list=[g for _, g in pairs])
            grads.append(dict(zip([g for _, g in pairs], vals)))
        final = {p: np.asarray(scope.find_value(p)).copy() for p in params}
    return grads, final


def _run_servers(t, grads, trainers):
    """Start each server, feed it the gradient blocks as its trainers would, run its
    lr and optimize blocks; return every parameter reassembled from the blocks."""
    exe = fluid.Executor()
    rows: dict[str, dict[int, np.ndarray]] = {}
    for ep in t.endpoints:
        ps = t.get_pserver_program(ep)
        scope = fluid.Scope()
        ls = ps.global_block().ops[-1]
        blocks = dict(e.rsplit(":", 1) for e in ls.attr("grad_to_block_id"))
        with fluid.scope_guard(scope):
            exe.run(t.get_startup_program(ep, ps))
            for g in grads:
                for gname in blocks:
                    full, _, k = gname.partition(".block")
                    arr = g[full]
                    if k:
                        pb = t._grad_blocks[full][int(k)]
                        arr = arr[pb.offset:pb.offset + pb.rows]
                    for tr in range(trainers):
                        scope.vars[f"{gname}.trainer_{tr}" if trainers > 1 else gname] = arr
                if ls.attr("lr_decay_block_id") >= 0:
                    exe.run_block(ps.block(ls.attr("lr_decay_block_id")), scope)
                for idx in ls.attr("optimize_blocks"):
                    exe.run_block(ps.block(idx), scope)
            for name in ls.attr("param_names"):
                full, _, k = name.partition(".block")
                rows.setdefault(full, {})[int(k or 0)] = np.asarray(scope.find_value(name))
    return {p: np.concatenate([parts[k] for k in sorted(parts)]) for p, parts in rows.items()}


@pytest.mark.parametrize("opt", ["momentum", "adam", "adam_decay"])
@pytest.mark.parametrize("trainers", [1, 2])
def test_server_blocks_reproduce_the_local_update(opt, trainers):
    xtr, _, ytr, _ = load_digits_split()
    feeds = [{"pixels": xtr[i * 16:(i + 1) * 16], "label": ytr[i * 16:(i + 1) * 16]}
             for i in range(3)]

    def make():
        if opt == "momentum":
            o = fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9)
        else:
            lr = 0.01
            if opt == "adam_decay":
                with fluid.program_guard(main, startup):
                    lr = fluid.layers.exponential_decay(0.01, decay_steps=1, decay_rate=0.5)
            o = fluid.optimizer.Adam(learning_rate=lr)
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.layers.data(name="pixels", shape=[64])
            y = fluid.layers.data(name="label", shape=[1], dtype="int64")
            h = fluid.layers.fc(x, size=32, act="relu",
                                param_attr=fluid.ParamAttr(learning_rate=0.5))
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=10), y))
            o.minimize(loss)
        return models.Model(main, startup, main, x, y, loss, loss, loss)

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    m = make()
    grads, local = _grads_and_update(m, feeds, 3)
    t = _transpile(m, trainers=trainers)
    if opt == "adam_decay":
        assert all(ep_ps.global_block().ops[-1].attr("lr_decay_block_id") > 0
                   for ep_ps in (t.get_pserver_program(ep) for ep in t.endpoints))
    dist = _run_servers(t, grads, trainers)
    assert sorted(dist) == sorted(local)
    for p in local:
        np.testing.assert_allclose(dist[p], local[p], rtol=0, atol=2e-6, err_msg=p)


def test_trainer_startup_fetches_parameters_and_the_step():
    t = _transpile(_mlp())
    st = t.get_trainer_startup_program()
    verify_program(st)
    recv = next(op for op in st.global_block().ops if op.type == "recv")
    assert recv.output("Step") == [STEP_VAR_NAME]
    assert "fetch_barrier" in _types(st)
