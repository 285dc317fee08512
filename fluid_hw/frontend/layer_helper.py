"""LayerHelper: what every layer function uses to create parameters, temporaries and ops."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ShapeError
from ..ir import unique_name
from ..ir.default_programs import default_main_program, default_startup_program
from ..ir.program import Block, Operator, Parameter, Program, Variable
from .initializer import Constant, Initializer, Xavier
from .param_attr import ParamAttr


class LayerHelper:
    def __init__(self, layer_type: str, name: str | None = None, **kwargs: Any) -> None:
        self.layer_type = layer_type
        self.kwargs = kwargs
        self.name = name or unique_name.generate(layer_type)

    @property
    def main_program(self) -> Program:
        return default_main_program()

    @property
    def startup_program(self) -> Program:
        return default_startup_program()

    @property
    def block(self) -> Block:
        return self.main_program.current_block()

    # -- variables -----------------------------------------------------
    def create_variable_for_type_inference(self, dtype: Any = "float32",
                                           stop_gradient: bool = False) -> Variable:
        """A temporary whose shape the next op's inference fills in."""
        return self.block.create_var(name=unique_name.generate(f"{self.name}.tmp"),
                                     dtype=dtype, stop_gradient=stop_gradient)

    create_tmp_variable = create_variable_for_type_inference

    def create_variable(self, **kw: Any) -> Variable:
        return self.block.create_var(**kw)

    def create_parameter(self, attr: ParamAttr, shape: Sequence[int], dtype: Any = "float32",
                         is_bias: bool = False,
                         default_initializer: Initializer | None = None) -> Parameter:
        """A parameter in the main program's global block, initialised in the startup program."""
        if any(d <= 0 for d in shape):
            raise ShapeError(f"layer {self.name}: parameter shape {list(shape)} must be positive")
        name = attr.name or unique_name.generate(f"{self.name}.{'b' if is_bias else 'w'}")
        init = attr.initializer or default_initializer or (Constant(0.0) if is_bias else Xavier())
        gb = self.main_program.global_block()
        if gb.has_var(name):
            p = gb.var(name)
            if list(p.shape) != list(shape):
                raise ShapeError(f"layer {self.name}: shared parameter {name!r} has shape "
                                 f"{list(p.shape)}, this layer needs {list(shape)}")
            assert isinstance(p, Parameter)
            return p
        p = gb.create_parameter(name=name, shape=shape, dtype=dtype, trainable=attr.trainable)
        p.optimize_attr = {"learning_rate": attr.learning_rate}
        p.regularizer = attr.regularizer
        p.gradient_clip_attr = attr.gradient_clip
        sb = self.startup_program.global_block()
        if not sb.has_var(name):
            sv = sb.create_var(name=name, shape=shape, dtype=dtype, persistable=True)
            init(sv, sb)
        return p

    # -- ops -----------------------------------------------------------
    def append_op(self, type: str, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None,
                  attrs: Mapping[str, Any] | None = None) -> Operator:
        """Append to the current block; shape errors name this layer."""
        try:
            return self.block.append_op(type, inputs, outputs, attrs)
        except ShapeError as e:
            raise ShapeError(f"layer {self.layer_type} {self.name!r}: {e}") from None

    def append_bias_op(self, x: Variable, attr: Any, dim_start: int = 1,
                       dim_end: int | None = None) -> Variable:
        battr = ParamAttr.to_attr(attr)
        if battr is False:
            return x
        assert isinstance(battr, ParamAttr)
        size = list(x.shape[dim_start:dim_end])
        b = self.create_parameter(battr, size, x.dtype, is_bias=True)
        out = self.create_variable_for_type_inference(x.dtype)
        self.append_op("elementwise_add", {"X": x, "Y": b}, {"Out": out}, {"axis": dim_start})
        return out

    def append_activation(self, x: Variable, act: str | Mapping[str, Any] | None) -> Variable:
        if act is None:
            return x
        attrs: dict[str, Any] = {}
        if isinstance(act, Mapping):
            attrs = dict(act)
            act = attrs.pop("type")
        out = self.create_variable_for_type_inference(x.dtype)
        self.append_op(str(act), {"X": x}, {"Out": out}, attrs)
        return out

    def input_dtype(self, inputs: Variable | Sequence[Variable]) -> int:
        vs = [inputs] if isinstance(inputs, Variable) else list(inputs)
        dts = {v.dtype for v in vs}
        if len(dts) != 1:
            raise ShapeError(f"layer {self.name}: inputs have different dtypes "
                             f"{[v.dtype_name for v in vs]}")
        return dts.pop()
