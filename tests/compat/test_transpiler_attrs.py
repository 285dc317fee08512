"""The attributes Fluid's DistributeTranspiler records and tools read:
has_distributed_lookup_table / table_name on the transpiler, and the programs'
_is_distributed, _is_chief, _endpoints, _ps_endpoint, _distributed_lookup_table."""

import pytest

import fluid_hw as fluid


def _net(distributed):
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(ids, size=[20, 4], is_distributed=distributed,
                                 param_attr="table")
    loss = fluid.layers.mean(fluid.layers.fc(emb, size=1))
    fluid.optimizer.SGD(0.1).minimize(loss)


@pytest.mark.parametrize(("trainer_id", "distributed"), [(0, False), (1, True)])
def test_transpile_records_fluids_attributes(fresh, trainer_id, distributed):
    main, startup, _ = fresh
    assert main._is_distributed is False and main._endpoints == []
    _net(distributed)
    t = fluid.transpiler.DistributeTranspiler()
    t.transpile(trainer_id, program=main, pservers="127.0.0.1:6174,127.0.0.1:6175",
                trainers=2, startup_program=startup, current_endpoint="127.0.0.1:6174")
    assert t.has_distributed_lookup_table is distributed
    assert t.table_name == ("table" if distributed else None)
    for prog in (main, t.get_trainer_program(wait_port=False)):
        assert prog._is_distributed is True
        assert prog._is_chief is (trainer_id == 0)
        assert prog._endpoints == ["127.0.0.1:6174", "127.0.0.1:6175"]
        assert prog._ps_endpoint == "127.0.0.1:6174"
        assert prog._distributed_lookup_table == ("table" if distributed else None)
    assert main.clone()._endpoints == main._endpoints
