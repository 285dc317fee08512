"""The program IR: protobuf ProgramDesc and the views, registry and verifier over it."""

from . import dtypes, unique_name
from .program import CURRENT_VERSION, Block, Operator, Parameter, Program, Variable, VarType
from .registry import Attr, InferContext, OpDef, Slot, all_ops, define_op, get_op, register_op
from .verifier import verify_program

__all__ = [
    "CURRENT_VERSION", "Attr", "Block", "InferContext", "OpDef", "Operator", "Parameter",
    "Program", "Slot", "VarType", "Variable", "all_ops", "define_op", "dtypes", "get_op",
    "register_op", "unique_name", "verify_program",
]
