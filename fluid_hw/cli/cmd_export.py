"""``fluid-hw export MODEL_DIR --out model.onnx``: an inference-model folder as ONNX."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    import fluid_hw as fluid

    from ..onnx import export

    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    program, feeds, fetches = fluid.io.load_inference_model(
        args.model, exe, model_filename=args.model_filename,
        params_filename=args.params_filename, scope=scope)
    model = export(program, args.out, feed_names=feeds, fetch_names=fetches, scope=scope,
                   opset=args.opset)
    print(f"wrote {args.out}: {len(model.graph.node)} nodes, "
          f"{len(model.graph.initializer)} initializers, opset "
          f"{model.opset_import[0].version}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="write an inference-model folder as an ONNX model")
    p.add_argument("model", help="the model folder (from save_inference_model or import)")
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 17)")
    p.add_argument("--model-filename", default=None)
    p.add_argument("--params-filename", default=None)
    p.set_defaults(fn=_run)
