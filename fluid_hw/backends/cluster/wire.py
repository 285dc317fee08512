"""The wire format: one MPI message = a small typed header + the raw tensor bytes
+ an authentication tag.

No pickle: a message is a flat byte buffer laid out as::

    offset  size  field
    0       4     magic b"FHW2"
    4       1     kind (:class:`Kind`)
    5       1     dtype code (:data:`DTYPES`; 0 = no payload)
    6       1     ndim (<= 8)
    7       1     reserved (0)
    8       4     trainer id (int32; -1 from a server)
    12      8     step (int64)
    20      8     payload bytes (int64)
    28      2     name length in bytes (uint16)
    30      2     reserved (0)
    32      8     sequence number (uint64; set by the sender's Comm, see .auth)
    40      8*nd  dims (int64 each)
    ..      n     name (UTF-8)
    ..      pad   zeros up to a multiple of 8
    ..      nb    payload: the tensor, C order, little-endian
    ..      32    HMAC-SHA256 tag over everything before it (filled in by .auth)

Everything is little-endian.  :func:`encode` leaves the sequence number and
the tag zero; :class:`.auth.Authenticator` fills them in just before the send
and checks them before :func:`decode` sees a received buffer.  The receiver
probes the message size, receives into one buffer and views the payload in
place (no copy); the sender makes one copy (header and tensor into one
buffer), so each tensor is one MPI message.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np

from .errors import WireError

MAGIC = b"FHW2"
_FIXED = struct.Struct("<4sBBBBiqqHHQ")
#: where the sequence number sits in the header
SEQ = struct.Struct("<Q")
SEQ_OFFSET = 32
#: bytes of the HMAC-SHA256 tag that ends every message
TAG_BYTES = 32
#: the shortest buffer that can be a message
MIN_BYTES = _FIXED.size + TAG_BYTES
MAX_NDIM = 8
MAX_NAME = 1024

#: dtype code <-> numpy dtype (little-endian); 0 means "no tensor"
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<f2"), 4: np.dtype("<i8"),
    5: np.dtype("<i4"), 6: np.dtype("<i2"), 7: np.dtype("i1"), 8: np.dtype("u1"),
    9: np.dtype("?"),
}
_CODES = {dt: code for code, dt in DTYPES.items()}


class Kind(enum.IntEnum):
    """What a message means."""

    GRAD = 1           #: trainer -> server: a gradient block
    SEND_BARRIER = 2   #: trainer -> server: all gradients of this step sent
    GET = 3            #: trainer -> server: please send parameter block `name`
    FETCH_BARRIER = 4  #: trainer -> server: all parameters of this step fetched
    COMPLETE = 5       #: trainer -> server: this trainer is done
    PARAM = 6          #: server -> trainer: a parameter block (reply to GET)
    PEER_STEPS = 7     #: server -> server: the checkpoint steps I hold


@dataclass
class Message:
    kind: Kind
    name: str
    trainer_id: int
    step: int
    array: np.ndarray | None  # a view into the received buffer


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def dtype_code(dt: np.dtype) -> int:
    code = _CODES.get(np.dtype(dt).newbyteorder("<"))
    if code is None:
        code = _CODES.get(np.dtype(dt))
    if code is None:
        known = ", ".join(str(d) for d in DTYPES.values())
        raise WireError(f"cannot send a tensor of dtype {dt}; the wire carries {known}")
    return code


def encode(kind: Kind, name: str = "", array: np.ndarray | None = None, trainer_id: int = -1,
           step: int = 0) -> np.ndarray:
    """One message as a uint8 buffer, ready for ``Isend``."""
    nb = name.encode()
    if len(nb) > MAX_NAME:
        raise WireError(f"variable name {name[:60]!r}... is {len(nb)} bytes; the wire allows "
                        f"{MAX_NAME}")
    if array is None:
        code, dims, nbytes = 0, (), 0
    else:
        array = np.asarray(array)
        code = dtype_code(array.dtype)
        dims = array.shape
        if len(dims) > MAX_NDIM:
            raise WireError(f"tensor {name!r} has {len(dims)} dims; the wire carries at most "
                            f"{MAX_NDIM}")
        nbytes = array.nbytes
    head = _FIXED.size + 8 * len(dims) + len(nb)
    off = _pad8(head)
    buf = np.zeros(off + nbytes + TAG_BYTES, np.uint8)
    _FIXED.pack_into(buf.data, 0, MAGIC, int(kind), code, len(dims), 0, int(trainer_id), int(step),
                     nbytes, len(nb), 0, 0)
    if dims:
        buf[_FIXED.size:_FIXED.size + 8 * len(dims)] = np.asarray(dims, "<i8").view(np.uint8)
    p = _FIXED.size + 8 * len(dims)
    buf[p:p + len(nb)] = np.frombuffer(nb, np.uint8)
    if array is not None and nbytes:
        want = DTYPES[code]
        buf[off:off + nbytes].view(want).reshape(dims)[...] = array  # converts byte order if needed
    return buf


def decode(buf: np.ndarray, source: str = "a peer") -> Message:
    """Parse a received buffer (authenticated first: see :mod:`.auth`); the tensor
    is a view into ``buf``."""
    if buf.nbytes < MIN_BYTES:
        raise WireError(f"message from {source} is {buf.nbytes} bytes, shorter than the "
                        f"{_FIXED.size}-byte header and {TAG_BYTES}-byte tag; is it running "
                        "fluid-hw?")
    magic, kind, code, ndim, _, tid, step, nbytes, nlen, _, _ = _FIXED.unpack_from(buf.data, 0)
    if magic != MAGIC:
        raise WireError(f"message from {source} starts with {magic!r}, not {MAGIC!r}: not a "
                        "fluid-hw message (or another fluid-hw version)")
    try:
        k = Kind(kind)
    except ValueError:
        raise WireError(f"message from {source} has unknown kind {kind}") from None
    if ndim > MAX_NDIM or (code and code not in DTYPES):
        raise WireError(f"message from {source} has a bad header (ndim {ndim}, dtype {code})")
    p = _FIXED.size + 8 * ndim
    off = _pad8(p + nlen)
    if buf.nbytes != off + nbytes + TAG_BYTES:
        raise WireError(f"message from {source} is {buf.nbytes} bytes; its header says "
                        f"{off + nbytes + TAG_BYTES} (truncated or corrupted)")
    dims = tuple(int(d) for d in buf[_FIXED.size:p].view("<i8"))
    try:
        name = bytes(buf[p:p + nlen]).decode()
    except UnicodeDecodeError:
        raise WireError(f"message from {source} has a name that is not UTF-8") from None
    arr = None
    if code:
        dt = DTYPES[code]
        if int(np.prod(dims, dtype=np.int64)) * dt.itemsize != nbytes:
            raise WireError(f"message from {source}: tensor {name!r} of shape {list(dims)} "
                            f"and dtype {dt} cannot be {nbytes} bytes")
        arr = buf[off:off + nbytes].view(dt).reshape(dims)
        if dt.byteorder == "<" and not dt.isnative:  # pragma: no cover - big-endian hosts
            arr = arr.astype(dt.newbyteorder("="))
    return Message(k, name, tid, step, arr)
