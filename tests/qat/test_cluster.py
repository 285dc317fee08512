"""A QAT program through the DistributeTranspiler (no MPI: program structure).

The quantisers are forward ops with in-place state and no update op, so every
trainer keeps them and its own scales: pserver mode initialises the scales in each
trainer's start-up program and the servers never hold them; collective mode treats
them as state the trainers agree on at the start (loaded from the checkpoint and
broadcast from trainer 0) and trainer 0 checkpoints them at the end.
"""

import fluid_hw as fluid
from fluid_hw.backends.cluster import DistributeTranspiler, DistributeTranspilerConfig
from fluid_hw.frontend import models
from fluid_hw.ir.verifier import verify_program
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, quant_aware

EPS = "127.0.0.1:6170,127.0.0.1:6171"
STATE = {f"{v}.{w}" for v in ("pixels", "fc_0.tmp_2", "fc_1.tmp_1")
         for w in ("scale", "accum", "state")}
ACT = "fake_quantize_dequantize_moving_average_abs_max"


def _transpile(mode, tmp_path):
    m = models.digits_mlp(hidden=(32,))
    with fluid.program_guard(m.main, m.startup), fluid.unique_name.guard():
        quant_aware(m.main, m.startup, QATConfig(Precision(4, 4)))
        fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9).minimize(m.loss)
    t = DistributeTranspiler(DistributeTranspilerConfig(
        min_block_size=256, checkpoint_dir=str(tmp_path), mode=mode))
    t.transpile(0, program=m.main, pservers=EPS, trainers=2, sync_mode=True,
                startup_program=m.startup)
    return t


def _state_names(op):
    return {n for n in op.input_arg_names + op.output_arg_names if n in STATE}


def test_pserver_trainers_keep_their_own_scales(tmp_path):
    t = _transpile("pserver", tmp_path)
    tp = t.get_trainer_program()
    verify_program(tp)
    acts = [op for op in tp.global_block().ops if op.type == ACT]
    assert len(acts) == 3 and set().union(*map(_state_names, acts)) == STATE
    st = t.get_trainer_startup_program()
    assert {n for op in st.global_block().ops if op.type == "fill_constant"
            for n in op.output("Out")} >= STATE
    for ep in EPS.split(","):
        assert not STATE & set(t.get_pserver_program(ep).global_block().vars)


def test_collective_trainers_start_from_trainer_0s_scales_and_checkpoint_them(tmp_path):
    t = _transpile("collective", tmp_path)
    verify_program(t.get_trainer_program())
    st = t.get_trainer_startup_program().global_block().ops
    assert _state_names(next(op for op in st if op.type == "checkpoint_load")) == STATE
    assert _state_names(next(op for op in st if op.type == "c_broadcast")) == STATE
    ex = t.get_trainer_exit_program().global_block().ops
    assert _state_names(next(op for op in ex if op.type == "checkpoint_save")) == STATE
