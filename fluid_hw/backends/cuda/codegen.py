"""CUDA C source of the generated kernels.

Every kernel is plain CUDA C: ``extern "C" __global__``, raw pointers and ints,
a grid-stride loop, no shared memory, no synchronisation and no atomics.  Each
thread's work is independent of every other thread's, so the same source also
compiles as host C++ with a shim that defines ``__global__`` and the index
variables and loops over the grid (:class:`~.runtime.HostShimRuntime`): that is
how CI runs these kernels without a GPU.  NVRTC has no standard headers, so the
sources include none.

Kernels:

* **elementwise chains** (:class:`ChainSpec`): a sequence of binary elementwise
  ops and unary activations computed per element in registers, one read of each
  input and one write of each needed output: the fused elementwise + activation
  groups, the bias + activation epilogue after a GEMM (fc, conv2d_fusion), and
  (as chains of one op) every unfused elementwise op and activation;
* ``softmax`` and ``softmax_with_cross_entropy`` over rows (one thread a row);
* ``im2col`` for conv2d (the GEMM is cuBLAS through CuPy);
* ``pool2d`` max / average over windows (one thread an output cell).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BINARY", "UNARY", "ChainSpec", "KernelSource", "Ref", "Step", "chain_kernel",
    "bcast_geometry", "fixed_kernels", "im2col_kernel", "pool2d_kernel", "softmax_kernel",
    "softmax_xent_kernel",
]


@dataclass(frozen=True)
class KernelSource:
    """One generated kernel: its name, CUDA C source and parameter C types."""

    name: str
    source: str
    params: tuple[str, ...]  # "const float*", "float*", "const long long*", "int", "long long"


def _lit(v: float) -> str:
    """A float32 C literal that reads back as exactly ``np.float32(v)``."""
    f = float(np.float32(v))
    if not np.isfinite(f):
        raise ValueError(f"constant {v!r} is not finite")
    return f"{f:.9g}f" if ("." in f"{f:.9g}" or "e" in f"{f:.9g}") else f"{f:.9g}.0f"


# -- elementwise chains ---------------------------------------------------------------

#: unary functions: C expression of the operand ``x`` and the op's attributes
UNARY: dict[str, Callable[[str, Mapping[str, float]], str]] = {
    "relu": lambda x, a: f"({x} > 0.0f ? {x} : 0.0f)",
    "sigmoid": lambda x, a: (f"({x} >= 0.0f ? 1.0f / (1.0f + expf(-{x})) "
                             f": expf({x}) / (1.0f + expf({x})))"),
    "tanh": lambda x, a: f"tanhf({x})",
    "exp": lambda x, a: f"expf({x})",
    "log": lambda x, a: f"logf({x})",
    "sqrt": lambda x, a: f"sqrtf({x})",
    "abs": lambda x, a: f"fabsf({x})",
    "leaky_relu": lambda x, a: f"({x} > 0.0f ? {x} : {x} * {_lit(a['alpha'])})",
    "square": lambda x, a: f"({x} * {x})",
    "reciprocal": lambda x, a: f"(1.0f / {x})",
    "floor": lambda x, a: f"floorf({x})",
    "ceil": lambda x, a: f"ceilf({x})",
    "round": lambda x, a: f"rintf({x})",  # half to even, as numpy
    "sign": lambda x, a: f"(float)(({x} > 0.0f) - ({x} < 0.0f))",
    "sin": lambda x, a: f"sinf({x})",
    "cos": lambda x, a: f"cosf({x})",
    # scale: Fluid's op (bias before or after the multiplication)
    "scale": lambda x, a: (f"({x} * {_lit(a['scale'])} + {_lit(a['bias'])})"
                           if a.get("bias_after_scale", 1.0)
                           else f"(({x} + {_lit(a['bias'])}) * {_lit(a['scale'])})"),
}

#: binary functions: C expression of ``a`` and ``b``
BINARY: dict[str, str] = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "div": "({a} / {b})",
    "max": "fmaxf({a}, {b})",
    "min": "fminf({a}, {b})",
    "pow": "powf({a}, {b})",
}


@dataclass(frozen=True)
class Ref:
    """An operand: chain input ``i`` (``"in"``) or the value of step ``i`` (``"tmp"``)."""

    kind: str
    index: int


@dataclass(frozen=True)
class Step:
    """One op of a chain: ``fn`` (a key of UNARY or BINARY) over ``args``."""

    fn: str
    args: tuple[Ref, ...]
    consts: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ChainSpec:
    """A fused elementwise chain over one index space of ``n`` elements.

    ``inputs[i]`` is ``"full"`` (read at the element's index) or ``"bcast"``
    (read at ``(i / post) % mid``: a block of the output's dims, e.g. a bias
    along the columns, a per-channel vector or a scalar).  ``outputs`` are the
    steps whose values are written, in order.
    """

    steps: tuple[Step, ...]
    inputs: tuple[str, ...]
    outputs: tuple[int, ...]

    def __post_init__(self) -> None:
        for k, s in enumerate(self.steps):
            want = 1 if s.fn in UNARY else 2 if s.fn in BINARY else None
            if want is None:
                raise ValueError(f"chain step {k}: unknown function {s.fn!r}")
            if len(s.args) != want:
                raise ValueError(f"chain step {k}: {s.fn} takes {want} operand(s)")
            for r in s.args:
                ok = (r.kind == "in" and 0 <= r.index < len(self.inputs)) or \
                     (r.kind == "tmp" and 0 <= r.index < k)
                if not ok:
                    raise ValueError(f"chain step {k}: bad operand {r}")
        if not self.outputs:
            raise ValueError("a chain writes at least one output")


def _chain_body(spec: ChainSpec) -> tuple[list[str], list[str], list[str]]:
    params, body = [], []
    names = []
    for j in range(len(spec.inputs)):
        params.append("const float*")
        names.append(f"in{j}")
    for o in range(len(spec.outputs)):
        params.append("float*")
        names.append(f"out{o}")
    params.append("int")
    names.append("n")
    for j, mode in enumerate(spec.inputs):
        if mode == "bcast":
            params += ["int", "int"]
            names += [f"mid{j}", f"post{j}"]
        elif mode != "full":
            raise ValueError(f"input {j}: mode {mode!r} is neither 'full' nor 'bcast'")
    for j, mode in enumerate(spec.inputs):
        idx = "i" if mode == "full" else f"(i / post{j}) % mid{j}"
        body.append(f"    const float x{j} = in{j}[{idx}];")

    def ref(r: Ref) -> str:
        return f"x{r.index}" if r.kind == "in" else f"t{r.index}"

    for k, s in enumerate(spec.steps):
        if s.fn in UNARY:
            expr = UNARY[s.fn](ref(s.args[0]), dict(s.consts))
        else:
            expr = BINARY[s.fn].format(a=ref(s.args[0]), b=ref(s.args[1]))
        body.append(f"    const float t{k} = {expr};")
    for o, k in enumerate(spec.outputs):
        body.append(f"    out{o}[i] = t{k};")
    return params, names, body


def chain_kernel(spec: ChainSpec) -> KernelSource:
    """The kernel computing ``spec``; its name is a hash of its body."""
    params, names, body = _chain_body(spec)
    sig = ", ".join(f"{t} __restrict__ {n}" if "*" in t else f"{t} {n}"
                    for t, n in zip(params, names))
    loop = "\n".join(body)
    text = ("(" + sig + ") {\n"
            "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
            "       i += blockDim.x * gridDim.x) {\n" + loop + "\n  }\n}\n")
    name = "fhw_ew_" + hashlib.sha1(text.encode()).hexdigest()[:12]
    ops = " -> ".join(s.fn for s in spec.steps)
    src = f"// fused elementwise chain: {ops}\nextern \"C\" __global__ void {name}{text}"
    return KernelSource(name, src, tuple(params))


# -- row kernels -------------------------------------------------------------------------

_SOFTMAX = r"""// softmax over the last axis: one thread a row
extern "C" __global__ void fhw_softmax_rows(const float* __restrict__ x,
                                            float* __restrict__ y, int rows, int cols) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x * gridDim.x) {
    const float* xr = x + (long long)r * cols;
    float* yr = y + (long long)r * cols;
    float m = xr[0];
    for (int c = 1; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) { const float e = expf(xr[c] - m); yr[c] = e; s += e; }
    for (int c = 0; c < cols; ++c) yr[c] = yr[c] / s;
  }
}
"""

_SOFTMAX_XENT = r"""// softmax_with_cross_entropy, hard labels, last axis: one thread a row
extern "C" __global__ void fhw_softmax_xent_rows(const float* __restrict__ z,
                                                 const long long* __restrict__ label,
                                                 float* __restrict__ sm,
                                                 float* __restrict__ loss,
                                                 int rows, int cols, long long ignore_index) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x * gridDim.x) {
    const float* zr = z + (long long)r * cols;
    float* sr = sm + (long long)r * cols;
    float m = zr[0];
    for (int c = 1; c < cols; ++c) m = fmaxf(m, zr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) { const float e = expf(zr[c] - m); sr[c] = e; s += e; }
    for (int c = 0; c < cols; ++c) sr[c] = sr[c] / s;
    const long long l = label[r];
    loss[r] = (l == ignore_index) ? 0.0f : -((zr[l] - m) - logf(s));
  }
}
"""

_IM2COL = r"""// im2col for conv2d: cols[g][n*OH*OW + oh*OW + ow][(c*KH + i)*KW + j], zero padding
extern "C" __global__ void fhw_im2col(const float* __restrict__ x, float* __restrict__ cols,
                                      int total, int N, int C, int H, int W, int OH, int OW,
                                      int KH, int KW, int SH, int SW, int PT, int PL,
                                      int DH, int DW, int G) {
  const int cg = C / G;
  const int width = cg * KH * KW;
  const int rows = N * OH * OW;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += blockDim.x * gridDim.x) {
    const int col = t % width;
    const int row = (t / width) % rows;
    const int g = t / (width * rows);
    const int j = col % KW;
    const int i = (col / KW) % KH;
    const int c = g * cg + col / (KW * KH);
    const int ow = row % OW;
    const int oh = (row / OW) % OH;
    const int n = row / (OW * OH);
    const int h = oh * SH - PT + i * DH;
    const int w = ow * SW - PL + j * DW;
    cols[t] = (h >= 0 && h < H && w >= 0 && w < W)
        ? x[(((long long)n * C + c) * H + h) * W + w] : 0.0f;
  }
}
"""

_POOL2D = r"""// pool2d over [N*C, H, W]: one thread an output cell; padding never counts
extern "C" __global__ void fhw_pool2d(const float* __restrict__ x, float* __restrict__ out,
                                      int total, int H, int W, int OH, int OW, int KH, int KW,
                                      int SH, int SW, int PT, int PL, int is_max,
                                      int exclusive) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += blockDim.x * gridDim.x) {
    const int ow = t % OW;
    const int oh = (t / OW) % OH;
    const int plane = t / (OW * OH);
    const float* xp = x + (long long)plane * H * W;
    const int h0 = oh * SH - PT;
    const int w0 = ow * SW - PL;
    float acc = is_max ? -3.40282347e+38f : 0.0f;
    int count = 0;
    for (int i = 0; i < KH; ++i) {
      const int h = h0 + i;
      if (h < 0 || h >= H) continue;
      for (int j = 0; j < KW; ++j) {
        const int w = w0 + j;
        if (w < 0 || w >= W) continue;
        const float v = xp[h * W + w];
        acc = is_max ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!is_max) {
      const int div = exclusive ? (count > 0 ? count : 1) : KH * KW;
      acc = acc / (float)div;
    }
    out[t] = acc;
  }
}
"""


def kernel_from_source(source: str) -> KernelSource:
    """A :class:`KernelSource` for hand-written CUDA C holding one ``extern "C"
    __global__`` kernel; the parameter types are read from its signature."""
    m = re.search(r'extern "C" __global__ void (\w+)\s*\(([^)]*)\)', source)
    if m is None:
        raise ValueError('source has no extern "C" __global__ kernel')
    params = []
    for p in m.group(2).split(","):
        words = p.replace("__restrict__", " ").replace("*", " * ").split()[:-1]
        params.append(" ".join(words).replace(" *", "*"))
    return KernelSource(m.group(1), source, tuple(params))


def softmax_kernel() -> KernelSource:
    return kernel_from_source(_SOFTMAX)


def softmax_xent_kernel() -> KernelSource:
    return kernel_from_source(_SOFTMAX_XENT)


def im2col_kernel() -> KernelSource:
    return kernel_from_source(_IM2COL)


def pool2d_kernel() -> KernelSource:
    return kernel_from_source(_POOL2D)


def fixed_kernels() -> list[KernelSource]:
    """The kernels that do not depend on the program."""
    return [softmax_kernel(), softmax_xent_kernel(), im2col_kernel(), pool2d_kernel()]


def bcast_geometry(aligned: Sequence[int], out: Sequence[int]) -> tuple[int, int] | None:
    """``(mid, post)`` reading an operand of (Fluid-aligned) shape ``aligned`` at
    ``(i / post) % mid`` for element ``i`` of ``out``; None when the operand's
    non-1 dims are not one contiguous block equal to ``out``'s dims there."""
    if len(aligned) != len(out):
        return None
    dims = [i for i, d in enumerate(aligned) if d != 1]
    if not dims:
        return 1, 1
    lo, hi = dims[0], dims[-1] + 1
    if any(aligned[i] != out[i] for i in range(lo, hi)):
        return None
    mid = int(np.prod(out[lo:hi]))
    post = int(np.prod(out[hi:]))
    return mid, post
