"""The probe channel: what crosses between the student's process S and the probe process P.

One frame is 8 bytes (``<II``: header length, payload length), a JSON header, and the
payload: the raw bytes of the arrays the header points to.  Never pickle.  Values are
JSON: null, booleans, numbers, strings and arrays (lists) stand for themselves, and every
JSON object is one of these tags, so nothing a student returns can pose as one::

    {"$f": "nan" | "inf" | "-inf"}              a non-finite float
    {"$int": "-0x1f..."}                        an int outside int64, exact (hex: linear)
    {"$tuple": [...]}, {"$dict": {"key": ...}}
    {"$array": [offset, nbytes], "dtype": "<f8", "shape": [2, 3], "torch": false, "grad": false}
    {"$rng": handle, "state": {...}}            a NumPy Generator, kept in S by handle
    {"$callback": handle}                       a function of P's, called back from S
    {"$object": handle, "methods": [...], "attrs": {...}}   an object of P's
    {"$module": handle, "params": [[name, array]], "children": [[name, module]], "attrs": {}}
                                                a torch module of P's, lent to S: S holds a
                                                copy of its parameters, its calls run in P
    {"$modules": [module, ...], "kind": "list" | "sequential"}   a ModuleList, a Sequential
    {"$held": handle}                           a value P asked S to keep, by S's handle
    {"$builtin": "gloo_ring"}                   an object S makes itself (a rank's comm)

A ranks run (``Student.ranks``) hands P one socket per rank process S forks, in a frame
of :func:`send_fds` (SCM_RIGHTS): P and the ranks then talk directly, the same frames.

Part of the jail's package, loaded in both processes before any student code runs;
imports nothing else of the project.  :func:`decode` checks every value against these
forms and caps (depth, sizes, dtypes): P reads what S sends as hostile.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import struct
import sys
import time

HEADER = struct.Struct("<II")
MAX_HEADER = 8 << 20
MAX_PAYLOAD = 512 << 20
MAX_DEPTH = 40
MAX_STRING = 1 << 20
MAX_INT_BITS = 1 << 18  # 78 914 decimal digits: hex converts in linear time either way
DTYPES = frozenset(
    ["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"]
)
_INT64 = 2**63
_HEX_INT = re.compile(r"-?0x[0-9a-f]+")

_type, _len, _isfinite = type, len, math.isfinite
_bool, _int, _float, _str, _list, _tuple, _dict = bool, int, float, str, list, tuple, dict
_dumps, _loads = json.dumps, json.loads
_write, _read = os.write, os.read


class WireError(Exception):
    """A frame or a value that is not what the protocol allows."""


class Closed(WireError):
    """The other side closed the channel (or died)."""


class Late(WireError):
    """Nothing arrived before the deadline."""


# --------------------------------------------------------------------------- frames


def send(fd: int, header: dict, payload: bytes = b"") -> None:
    head = _dumps(header, allow_nan=False, separators=(",", ":")).encode()
    if _len(head) > MAX_HEADER or _len(payload) > MAX_PAYLOAD:
        raise WireError(f"a message larger than {MAX_HEADER} + {MAX_PAYLOAD} bytes")
    _write_all(fd, HEADER.pack(_len(head), _len(payload)) + head + payload)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[_write(fd, view) :]
        except InterruptedError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise Closed("the other side closed the channel") from None


def send_fds(fd: int, header: dict, fds: list[int]) -> None:
    """A frame of ``header`` alone that hands ``fds`` over (SCM_RIGHTS; ``fd``: a Unix
    socket): the receiver holds its own copies, this side may close these."""
    import socket

    head = _dumps(header, allow_nan=False, separators=(",", ":")).encode()
    data = HEADER.pack(_len(head), 0) + head
    sock = socket.socket(fileno=fd)
    try:
        sent = socket.send_fds(sock, [data], fds)
    except OSError:
        raise Closed("the other side closed the channel") from None
    finally:
        sock.detach()
    if sent < _len(data):
        _write_all(fd, data[sent:])


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Late("no answer in time")
        try:
            chunk = _read(fd, min(n - got, 1 << 20))
        except InterruptedError:
            continue
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise Closed("the other side closed the channel")
        chunks.append(chunk)
        got += _len(chunk)
    return b"".join(chunks)


def recv(fd: int, deadline: float | None = None) -> tuple[dict, bytes]:
    """One frame: (header, payload); Late past ``deadline`` (time.monotonic()), Closed at EOF."""
    return _rest(fd, _read_exact(fd, HEADER.size, deadline), deadline)


def recv_fds(fd: int, deadline: float, most: int) -> tuple[dict, bytes, list[int]]:
    """One frame and the descriptors handed over with it (none, for a frame sent by
    :func:`send`); more than ``most`` is a WireError, with every one closed."""
    import socket

    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        raise Late("no answer in time")
    sock = socket.socket(fileno=fd)
    try:
        data, fds, flags, _ = socket.recv_fds(sock, HEADER.size, most)
    except OSError:
        raise Closed("the other side closed the channel") from None
    finally:
        sock.detach()
    try:
        if flags & socket.MSG_CTRUNC:
            raise WireError(f"more than {most} descriptors handed over")
        if not data:
            raise Closed("the other side closed the channel")
        if _len(data) < HEADER.size:
            data += _read_exact(fd, HEADER.size - _len(data), deadline)
        header, payload = _rest(fd, data, deadline)
    except BaseException:
        for x in fds:
            os.close(x)
        raise
    return header, payload, fds


def _rest(fd: int, head: bytes, deadline: float | None) -> tuple[dict, bytes]:
    """The frame whose 8 first bytes are ``head``."""
    n_head, n_payload = HEADER.unpack(head)
    if n_head > MAX_HEADER or n_payload > MAX_PAYLOAD:
        raise WireError(f"a frame of {n_head} + {n_payload} bytes is over the limits")
    body = _read_exact(fd, n_head + n_payload, deadline)
    try:
        header = _loads(body[:n_head])
    except (ValueError, RecursionError):
        raise WireError("a frame header is not JSON") from None
    if _type(header) is not _dict:
        raise WireError("a frame header is not an object")
    return header, body[n_head:]


# --------------------------------------------------------------------------- values


class Encoder:
    """Tags values for one frame and gathers their arrays into its payload.

    ``handle(obj, kind)`` names a P-side object (a callback, an object, a generator) by a
    handle the receiving side keeps; only P passes such objects.
    """

    def __init__(self, handle=None):
        self.parts: list[bytes] = []
        self.size = 0
        self.handle = handle

    @property
    def payload(self) -> bytes:
        return b"".join(self.parts)

    def _array(self, a, is_torch: bool, grad: bool) -> dict:
        import numpy as np

        a = np.ascontiguousarray(a)
        dtype = a.dtype.str
        if dtype not in DTYPES:
            raise WireError(f"an array of dtype {a.dtype} (numbers and booleans only)")
        data = a.tobytes()
        node = {"$array": [self.size, _len(data)], "dtype": dtype, "shape": _list(a.shape)}
        node["torch"], node["grad"] = is_torch, grad
        self.parts.append(data)
        self.size += _len(data)
        if self.size > MAX_PAYLOAD:
            raise WireError(f"arrays larger than {MAX_PAYLOAD} bytes")
        return node

    def value(self, v, depth: int = 0):
        if depth > MAX_DEPTH:
            raise WireError(f"nested deeper than {MAX_DEPTH} levels")
        t = _type(v)
        if v is None or t is _bool:
            return v
        if t is _str:
            if _len(v) > MAX_STRING:
                raise WireError(f"a string of {_len(v)} characters")
            return v
        if t is _int:
            if -_INT64 <= v < _INT64:
                return v
            if v.bit_length() > MAX_INT_BITS:
                raise WireError(f"an int of {v.bit_length()} bits")
            return {"$int": hex(v)}
        if t is _float:
            if _isfinite(v):
                return v
            return {"$f": "nan" if v != v else ("inf" if v > 0 else "-inf")}
        if t is _list:
            return [self.value(x, depth + 1) for x in v]
        if t is _tuple:
            return {"$tuple": [self.value(x, depth + 1) for x in v]}
        if t is _dict:
            out = {}
            for k, x in v.items():
                if _type(k) is not _str:
                    raise WireError("a dict key that is not a string")
                out[k] = self.value(x, depth + 1)
            return {"$dict": out}
        module = getattr(t, "__module__", "") or ""
        if module == "numpy":
            import numpy as np

            if t is np.ndarray:
                return self._array(v, False, False)
            if isinstance(v, np.bool_):
                return _bool(v)
            if isinstance(v, np.str_):
                return self.value(_str.__str__(v), depth)
            if isinstance(v, np.integer):
                return self.value(_int(v), depth)
            if isinstance(v, np.floating):
                return self.value(_float(v), depth)
        if module.startswith("numpy.random") and self.handle is not None:
            return {"$rng": self.handle(v, "rng"), "state": v.bit_generator.state}
        if module.startswith("torch"):
            import torch

            if isinstance(v, torch.Tensor):
                grad = bool(v.requires_grad)
                return self._array(v.detach().cpu().numpy(), True, grad)
        if self.handle is not None:
            held = getattr(t, "__wire_held__", None)
            if held is not None:
                return {"$held": held.__get__(v)}
            builtin = getattr(t, "__wire_builtin__", None)
            if _type(builtin) is _str:
                return {"$builtin": builtin}
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(v, torch.nn.Module):
                return self._module(v, depth)
            if callable(v) and not isinstance(v, type):
                return {"$callback": self.handle(v, "callback")}
            return self._object(v)
        raise WireError(f"an object of type {_name(v)} (plain data and arrays only)")

    def _module(self, m, depth: int) -> dict:
        import torch

        if depth > MAX_DEPTH:
            raise WireError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(m, torch.nn.ModuleList | torch.nn.Sequential):
            kind = "sequential" if isinstance(m, torch.nn.Sequential) else "list"
            return {"$modules": [self._module(c, depth + 1) for c in m], "kind": kind}
        params = [[n, p] for n, p in m.named_parameters(recurse=False)]
        children = [[n, self._module(c, depth + 1)] for n, c in m.named_children()]
        attrs = {
            k: x
            for k, x in vars(m).items()
            if not k.startswith("_") and _type(x) in (_bool, _int, _float, _str)
        }
        return {
            "$module": self.handle(m, "module"),
            "params": self.value(params, depth + 1),
            "children": children,
            "attrs": self.value(attrs, depth + 1),
        }

    def _object(self, v) -> dict:
        methods, attrs = [], {}
        for name in dir(v):
            if name.startswith("_"):
                continue
            x = getattr(v, name)
            if callable(x):
                methods.append(name)
            else:
                attrs[name] = self.value(x)
        return {"$object": self.handle(v, "object"), "methods": methods, "attrs": attrs}


def _name(v) -> str:
    try:
        t = _type(v)
        return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__name__
    except Exception:  # noqa: BLE001
        return "object"


def decode(node, payload: bytes, resolve=None, depth: int = 0):
    """A value from its tagged JSON; ``resolve(kind, handle, node)`` makes the object a
    handle stands for (S's stubs for P's callbacks; None refuses handles)."""
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    t = _type(node)
    if node is None or t is _bool or t is _int:
        return node
    if t is _float:
        if not _isfinite(node):
            raise WireError("a non-finite number outside {'$f': ...}")
        return node
    if t is _str:
        if _len(node) > MAX_STRING:
            raise WireError(f"a string of {_len(node)} characters")
        return node
    if t is _list:
        return [decode(x, payload, resolve, depth + 1) for x in node]
    if t is not _dict or _len(node) < 1:
        raise WireError("a value that is not data")
    if "$f" in node:
        names = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
        if _len(node) != 1 or node["$f"] not in names:
            raise WireError("a malformed non-finite number")
        return names[node["$f"]]
    if "$int" in node:
        text = node["$int"]
        if (
            _len(node) != 1
            or _type(text) is not _str
            or _len(text) > MAX_INT_BITS // 4 + 3
            or not _HEX_INT.fullmatch(text)
        ):
            raise WireError("a malformed int")
        return _int(text, 16)
    if "$tuple" in node:
        items = node["$tuple"]
        if _len(node) != 1 or _type(items) is not _list:
            raise WireError("a malformed tuple")
        return _tuple(decode(x, payload, resolve, depth + 1) for x in items)
    if "$dict" in node:
        items = node["$dict"]
        if _len(node) != 1 or _type(items) is not _dict:
            raise WireError("a malformed dict")
        return {k: decode(x, payload, resolve, depth + 1) for k, x in items.items()}
    if "$array" in node:
        return _decode_array(node, payload)
    if "$module" in node:
        if set(node) != {"$module", "params", "children", "attrs"} or resolve is None:
            raise WireError("a module where none may come")
        parts = {k: decode(node[k], payload, resolve, depth + 1) for k in ("params", "attrs")}
        children = node["children"]
        if _type(children) is not _list or not all(
            _type(c) is _list and _len(c) == 2 and _type(c[0]) is _str for c in children
        ):
            raise WireError("a malformed module")
        parts["children"] = [[n, decode(c, payload, resolve, depth + 1)] for n, c in children]
        return resolve("module", node["$module"], parts)
    if "$modules" in node:
        items = node["$modules"]
        if (
            set(node) != {"$modules", "kind"}
            or node["kind"] not in ("list", "sequential")
            or _type(items) is not _list
            or resolve is None
        ):
            raise WireError("a malformed list of modules")
        items = [decode(x, payload, resolve, depth + 1) for x in items]
        return resolve("modules", node["kind"], items)
    for kind in ("rng", "callback", "object", "held", "builtin"):
        if f"${kind}" in node:
            if resolve is None:
                raise WireError(f"a {kind} handle where none may come")
            return resolve(kind, node[f"${kind}"], node)
    raise WireError(f"an unknown tag {sorted(node)[:3]}")


def _decode_array(node: dict, payload: bytes):
    import numpy as np

    if set(node) != {"$array", "dtype", "shape", "torch", "grad"}:
        raise WireError("a malformed array")
    span, dtype, shape = node["$array"], node["dtype"], node["shape"]
    if (
        _type(span) is not _list
        or _len(span) != 2
        or not all(_type(x) is _int and x >= 0 for x in span)
        or dtype not in DTYPES
        or _type(shape) is not _list
        or _len(shape) > 16
        or not all(_type(x) is _int and x >= 0 for x in shape)
        or _type(node["torch"]) is not _bool
        or _type(node["grad"]) is not _bool
    ):
        raise WireError("a malformed array")
    offset, nbytes = span
    dt = np.dtype(dtype)
    if offset + nbytes > _len(payload) or math.prod(shape) * dt.itemsize != nbytes:
        raise WireError("an array whose bytes do not match its shape and dtype")
    a = np.frombuffer(payload, dtype=dt, count=math.prod(shape), offset=offset).reshape(shape)
    a = a.copy()  # writable, and free of the frame
    if node["torch"]:
        import torch

        t = torch.from_numpy(a)
        return t.requires_grad_(True) if node["grad"] and t.is_floating_point() else t
    return a
