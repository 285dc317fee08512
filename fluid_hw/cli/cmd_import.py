"""``fluid-hw import model.onnx --out MODEL_DIR``: an ONNX model as an inference-model folder."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..onnx import load

    m = load(args.model)
    saved = m.save(args.out, params_filename=args.params_filename)
    gb = m.program.global_block()
    print(f"imported {m.source} (opset {m.opset}): {len(gb.ops)} ops, {len(saved)} parameters")
    for n in m.feed_names:
        v = gb.var(n)
        print(f"  feed  {n}: {v.dtype_name}{list(v.shape)}")
    for n in m.fetch_names:
        v = gb.var(n)
        print(f"  fetch {n}: {v.dtype_name}{list(v.shape)}")
    print(f"wrote {args.out} (load it with fluid_hw.io.load_inference_model)")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("import", help="convert an ONNX model into an inference-model folder")
    p.add_argument("model", help="the .onnx file")
    p.add_argument("--out", required=True, help="the model folder to write")
    p.add_argument("--params-filename", default=None,
                   help="store every parameter in this one .npz file (default: one .npy each)")
    p.set_defaults(fn=_run)
