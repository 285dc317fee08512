"""The ONNX tests need the ``onnx`` extra (onnx, onnxruntime); without it they are not
collected (the core install does not need them)."""

import importlib.util

collect_ignore_glob = ([] if all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime"))
                       else ["*.py"])
