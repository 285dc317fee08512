#!/usr/bin/env bash
# fluid-hw GPU check: one prepared command for a machine with an NVIDIA GPU.
#
#   bash benchmarks/gpu_check.sh            (the lead's `make gpu-check`)
#
# Runs the tests marked `gpu` (the whole op suite on CUDAPlace against the CPU
# executor, the digits MLP trained on the GPU, fused vs unfused kernels, data
# parallelism over GPU places, CUDA graphs), then benchmarks/bench_gpu.py, then
# `fluid-hw bench` on the demo's model with the cpu and cuda back ends (its
# bench.json is what `fluid-hw bench --merge` reads), in under ten minutes.  Needs Python with CuPy, numpy, protobuf and
# scikit-learn; nothing is installed and nothing is downloaded.  pytest is used
# when it is there; without it a small runner in this script calls the same test
# functions (parametrised cases included) and prints pytest's summary line.
# Exit status: non-zero when a test failed or the benchmark could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export FLUID_HW_CHECK_KERNELS=1
OUT=${GPU_CHECK_OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT"

echo "== fluid-hw gpu check ($("$PY" --version 2>&1), $(date -u +%Y-%m-%dT%H:%M:%SZ))"
"$PY" - <<'PYEOF'
from fluid_hw.backends.cuda import device_count
from fluid_hw.backends.cuda.runtime import require_device
try:
    cupy = require_device(0)
    for i in range(device_count()):
        p = cupy.cuda.runtime.getDeviceProperties(i)
        name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
        print(f"   device {i}: {name}, {p['totalGlobalMem'] / 2**30:.0f} GiB, "
              f"sm_{p['major']}{p['minor']}")
    print(f"   CuPy {cupy.__version__}")
except Exception as e:
    print(f"   no GPU: {e}")
PYEOF

echo "== gpu tests"
status=0
if "$PY" -c "import pytest" 2>/dev/null; then
  timeout 200 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider tests/backends/cuda/test_gpu.py \
    tests/backends/cuda/test_graph.py || status=$?
else
  timeout 200 "$PY" - <<'PYEOF' || status=$?
# A minimal stand-in for pytest (absent here): runs every test function of
# tests/backends/cuda/test_gpu.py, expanding parametrize marks, honouring skipif.
import itertools, sys, time, traceback, types

class _Mark:
    def __init__(self, name, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, args, kwargs or {}
    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            args[0].__dict__.setdefault("marks", []).append(self)
            return args[0]
        return _Mark(self.name, args, kwargs)

class _MarkNS:
    def __getattr__(self, name):
        return _Mark(name)

class Skipped(Exception):
    pass

def _skip(reason=""):
    raise Skipped(reason)

class _Raises:
    def __init__(self, exc, match=None):
        self.exc, self.match = exc, match
    def __enter__(self):
        return self
    def __exit__(self, et, ev, tb):
        import re
        if et is None:
            raise AssertionError(f"DID NOT RAISE {self.exc}")
        if not issubclass(et, self.exc):
            return False
        if self.match and not re.search(self.match, str(ev)):
            raise AssertionError(f"{ev!r} does not match {self.match!r}")
        return True

fake = types.ModuleType("pytest")
fake.mark = _MarkNS()
fake.skip = _skip
fake.raises = _Raises
fake.fixture = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
sys.modules["pytest"] = fake

import importlib
passed = failed = skipped = 0
for mod, name in [(m, n) for m in map(importlib.import_module, (
        "tests.backends.cuda.test_gpu", "tests.backends.cuda.test_graph"))
        for n in sorted(dir(m)) if n.startswith("test_")]:
    module_marks = getattr(mod, "pytestmark", [])
    fn = getattr(mod, name)
    marks = list(module_marks) + list(getattr(fn, "marks", []))
    if not any(m.name == "gpu" for m in marks):
        continue  # as pytest -m gpu
    skip = [m for m in marks if m.name == "skipif" and m.args and m.args[0]]
    params = [m for m in marks if m.name == "parametrize"]
    grids = []
    for m in params:
        argnames = [a.strip() for a in m.args[0].split(",")]
        values = m.args[1]
        ids = m.kwargs.get("ids")
        rows = []
        for i, v in enumerate(values):
            v = v if len(argnames) > 1 else (v,)
            label = ids[i] if isinstance(ids, list) else str(v[0] if len(v) == 1 else v)
            rows.append((dict(zip(argnames, v)), label))
        grids.append(rows)
    for combo in itertools.product(*grids) if grids else [()]:
        kwargs, label = {}, "-".join(lbl for _, lbl in combo)
        for kw, _ in combo:
            kwargs.update(kw)
        test_id = f"{name}[{label}]" if label else name
        if skip:
            skipped += 1
            print(f"SKIPPED {test_id}: {skip[0].kwargs.get('reason', '')}")
            continue
        t0 = time.perf_counter()
        try:
            fn(**kwargs)
        except Skipped as e:
            skipped += 1
            print(f"SKIPPED {test_id}: {e}")
        except Exception:
            failed += 1
            print(f"FAILED  {test_id}")
            traceback.print_exc()
        else:
            passed += 1
            print(f"PASSED  {test_id} ({time.perf_counter() - t0:.1f}s)")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PYEOF
fi
[ "$status" -eq 124 ] && echo "gpu tests: timed out after 200 s"

echo "== gpu benchmark"
bench=0
timeout 90 "$PY" benchmarks/bench_gpu.py --budget 0.2 --out "$OUT/bench_gpu.json" || bench=$?
[ "$bench" -eq 124 ] && echo "benchmark: timed out after 90 s"

# fluid-hw bench's GPU half: the demo's model (or BENCH_MODEL) on the CPU and the GPU;
# on the machine without a GPU, `fluid-hw bench MODEL --merge $OUT/bench/bench.json`
# takes its cuda rows (the same model, checked by fingerprint)
echo "== fluid-hw bench (cuda rows for --merge)"
BENCH_MODEL=${BENCH_MODEL:-$ROOT/build/demo/mlp_inference}
fhw=0
if [ -f "$BENCH_MODEL/__model__" ]; then
  timeout 180 "$PY" -m fluid_hw.cli.main bench "$BENCH_MODEL" --backends cpu,cuda \
    --out "$OUT/bench" || fhw=$?
  [ "$fhw" -eq 124 ] && echo "fluid-hw bench: timed out after 180 s"
else
  echo "   no model at $BENCH_MODEL (run make demo first, or set BENCH_MODEL): skipped"
fi

echo "== gpu check: tests exit $status, benchmark exit $bench, fluid-hw bench exit $fhw" \
     "(JSON: $OUT/bench_gpu.json, $OUT/bench/bench.json)"
[ "$status" -eq 0 ] && [ "$bench" -eq 0 ] && [ "$fhw" -eq 0 ]
