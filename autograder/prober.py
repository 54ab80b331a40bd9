"""The probe process P: runs the code checks' ``probe()`` against the student's functions,
which live in another process.

P is forked beside the student's process S, never from it: another uid (S can neither
signal, trace nor read it), no student code, and the only holder of the probe code, the
grading seeds and the inputs.  ``probe(student, seed, params)`` gets a :class:`Student`
proxy: calling it sends the arguments to S as plain data (arrays as raw bytes), S calls the
student's function and sends back what it returned, checked here against the wire's forms
(:mod:`wire`).  A callable or an object among the arguments stays in P: S gets a stub, and
every call of it comes back here (a ring's ``comm.send_recv``, a gradient oracle), where the
probe counts and logs it.  Everything S sends is hostile: capped, schema-checked, and
under a deadline.

Loaded by path by the executor (never from the ``autograder`` package), like the harness.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import sys
import time
import types

wire = None  # the wire module, set by the executor (loaded by path too)

MAX_ERROR_CHARS = 2000
ANSWER_SECONDS = 30.0  # the longest one call may take, unless the probe asks for more
STOP_MARGIN_SECONDS = 2.0  # P stops waiting for S this long before the job's wall limit
_EXCEPTIONS = {
    name: cls
    for name, cls in vars(builtins).items()
    if isinstance(cls, type) and issubclass(cls, Exception) and not name.startswith("_")
}


class StudentGone(BaseException):
    """The student's process stopped answering: it ended, or took longer than allowed."""


def _error_text(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return text[:MAX_ERROR_CHARS]


def raised(kind: str, message: str) -> Exception:
    """What the student's code raised, as an exception here: a built-in type keeps its
    type (a probe may expect ValueError); any other is a RuntimeError naming it."""
    cls = _EXCEPTIONS.get(kind) if isinstance(kind, str) else None
    if cls is not None and cls not in (StopIteration, StopAsyncIteration):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - an exception type that wants other arguments
            pass
    return RuntimeError(f"{str(kind)[:100]}: {message}")


class Channel:
    """P's end of the channel to S: calls out, callbacks in, handles for P's objects."""

    def __init__(self, fd: int, deadline: float):
        self.fd = fd
        self.deadline = deadline  # the whole job's: past it, S is not waited for
        self.next_id = 0
        self.objects: dict[int, object] = {}
        self.handles: dict[int, int] = {}  # id(obj) -> handle
        self.gone: str | None = None
        self.calls = 0

    def handle(self, obj, kind: str) -> int:
        h = self.handles.get(id(obj))
        if h is None:
            h = len(self.objects)
            self.objects[h] = obj  # kept alive: its id stays its own
            self.handles[id(obj)] = h
        return h

    def _send(self, header: dict, payload: bytes = b"") -> None:
        try:
            wire.send(self.fd, header, payload)
        except wire.WireError as err:
            self._lost(f"the channel to the notebook's process broke ({err})")

    def _lost(self, why: str):
        self.gone = self.gone or why
        raise StudentGone(self.gone)

    def request(self, header: dict, values: dict, seconds: float | None = None):
        """Send ``header`` with ``values`` encoded; serve callbacks until the answer."""
        if self.gone:
            raise StudentGone(self.gone)
        self.next_id += 1
        rid = self.next_id
        enc = wire.Encoder(self.handle)
        body = dict(header, id=rid, **{k: enc.value(v) for k, v in values.items()})
        self._send(body, enc.payload)
        until = min(self.deadline, time.monotonic() + (seconds or ANSWER_SECONDS))
        while True:
            try:
                msg, payload = wire.recv(self.fd, until)
            except wire.Late:
                self._lost(
                    f"the notebook's function did not answer within {seconds or ANSWER_SECONDS:g} s"
                )
            except wire.Closed:
                self._lost("the notebook's process ended during the call")
            except wire.WireError as err:
                self._lost(f"the notebook's process sent something malformed: {err}")
            op = msg.get("op")
            if op == "callback":
                self._callback(msg, payload)
                continue
            if msg.get("id") != rid:
                self._lost("the notebook's process answered out of turn")
            try:
                if op == "result":
                    return wire.decode(msg.get("value"), payload)
                if op == "raised":
                    raise raised(msg.get("type"), str(msg.get("message", ""))[:MAX_ERROR_CHARS])
            except wire.WireError as err:
                raise TypeError(
                    f"the function returned something that is not data: {err}"
                ) from None
            self._lost(f"the notebook's process sent an unknown message {str(op)[:40]!r}")

    def _callback(self, msg: dict, payload: bytes) -> None:
        """A stub in S called one of P's objects: run it here, answer with its value."""
        cid = msg.get("id")
        try:
            target = self.objects[msg["handle"]]
            method = msg.get("method")
            if method is not None:
                if not isinstance(method, str) or method.startswith("_"):
                    raise AttributeError(f"no method {str(method)[:40]!r}")
                target = getattr(target, method)
            args = wire.decode(msg.get("args"), payload)
            kwargs = wire.decode(msg.get("kwargs"), payload)
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise TypeError("malformed arguments")
            value = target(*args, **kwargs)
            enc = wire.Encoder(self.handle)
            self._send({"op": "reply", "id": cid, "value": enc.value(value)}, enc.payload)
        except StudentGone:
            raise
        except (KeyError, wire.WireError) as err:
            self._send({"op": "fail", "id": cid, "type": "TypeError", "message": str(err)[:500]})
        except Exception as err:  # noqa: BLE001 - the probe's object raised: the student sees it
            self._send(
                {"op": "fail", "id": cid, "type": type(err).__name__, "message": str(err)[:500]}
            )


class Student:
    """The student's function, called from P: arguments and results cross as data."""

    def __init__(self, channel: Channel, name: str):
        self._channel = channel
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        self._channel.calls += 1
        return self._channel.request(
            {"op": "call", "function": self.__name__}, {"args": list(args), "kwargs": kwargs}
        )

    def gradient(self, *args, **kwargs):
        """Call, then differentiate in S: (value, gradients, why there are none).  The
        gradients are those of the value's sum with respect to the arguments that are
        tensors with ``requires_grad``, in order (None for an unused one)."""
        self._channel.calls += 1
        out = self._channel.request(
            {"op": "gradient", "function": self.__name__}, {"args": list(args), "kwargs": kwargs}
        )
        if not (isinstance(out, tuple) and len(out) == 3):
            raise TypeError("the notebook's process answered a gradient malformed")
        value, grads, why = out
        if grads is not None and not isinstance(grads, list):
            raise TypeError("the notebook's process answered a gradient malformed")
        return value, grads, why if isinstance(why, str) or why is None else "malformed"

    def map(self, calls: list, seconds: float | None = None) -> list:
        """Many calls in one round trip: ``calls`` is a list of argument tuples; each
        item of the answer is the value returned, or the exception raised."""
        self._channel.calls += len(calls)
        out = self._channel.request(
            {"op": "map", "function": self.__name__},
            {"calls": [list(c) for c in calls]},
            seconds,
        )
        if not isinstance(out, list) or len(out) != len(calls):
            raise TypeError("the notebook's process answered a batch with the wrong length")
        return [_item(x) for x in out]

    def repeat(self, args: tuple, times: int, seconds: float | None = None) -> list:
        """``times`` calls with the same arguments (each call gets its own copy), in one
        round trip: a sampler drawn thousands of times.  Answers as :meth:`map`'s."""
        self._channel.calls += times
        out = self._channel.request(
            {"op": "repeat", "function": self.__name__, "times": int(times)},
            {"args": list(args)},
            seconds,
        )
        if not isinstance(out, list) or len(out) != times:
            raise TypeError("the notebook's process answered a batch with the wrong length")
        return [_item(x) for x in out]

    def sibling(self, name: str) -> Student:
        """Another function of the same notebook (``optimal_eps`` beside ``ddpm_sample``);
        calling it raises NameError when the notebook does not define it."""
        return Student(self._channel, name)

    def seed(self, stream: int) -> None:
        """Seed the global generators of S (numpy, random, torch): a student who uses them
        instead of the generator given gets the same numbers in every run."""
        self._channel.request({"op": "seed"}, {"stream": int(stream)})


def _item(x):
    """One answer of a batch: ("ok", value) or ("raised", type, message)."""
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "ok":
        return x[1]
    if isinstance(x, tuple) and len(x) == 3 and x[0] == "raised":
        return raised(x[1], str(x[2])[:MAX_ERROR_CHARS])
    return TypeError("the notebook's process answered a batch item malformed")


def _plain(value, depth: int = 0):
    """A probe's result as JSON data (it is the instructor's code; checked all the same)."""
    if depth > 40:
        raise TypeError("a probe result nested too deeply")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if type(value) in (list, tuple):
        return [_plain(v, depth + 1) for v in value]
    if type(value) is dict:
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    module = type(value).__module__
    if module == "numpy":
        return _plain(value.tolist(), depth)
    raise TypeError(f"a probe result of type {type(value).__name__}")


def _run_probe(channel: Channel, probe: dict, defined: set[str], budget: int) -> dict:
    name = probe["function"]
    if name not in defined:
        return {"ok": False, "error": f"function {name} is not defined"}
    module = types.ModuleType(f"scalegrade_checks_{probe['id']}".replace("-", "_"))
    module.__file__ = f"<checks {probe['id']}>"
    sys.modules[module.__name__] = module
    try:
        exec(compile(probe["source"], module.__file__, "exec"), module.__dict__)  # noqa: S102
        params = json.loads(probe["params_json"])
        result = _plain(module.probe(Student(channel, name), probe["seed"], params))
    except StudentGone as err:
        return {"ok": False, "error": str(err)[:MAX_ERROR_CHARS]}
    except BaseException as err:  # noqa: BLE001 - the checks' error is this probe's result
        return {"ok": False, "error": _error_text(err)}
    finally:
        sys.modules.pop(module.__name__, None)
    text = json.dumps(result)
    if len(text) > budget:
        return {"ok": False, "error": f"probe result larger than {budget} bytes"}
    return {"ok": True, "result": result}


def run(probes: list[dict], fd: int, result_fd: int, limits: dict) -> None:
    """Wait for S to have run the cells (and sent its harvest), then run each probe in turn;
    write the results once.  With no probe, P only waits: S then ends when P does."""
    start = time.monotonic()
    wall = float(limits["wall_seconds"])
    # past this, S is not waited for: P reports and ends, and the executor ends S (after
    # its grace, SERVE_GRACE_SECONDS) before the job's wall limit would discard everything
    deadline = start + max(0.5 * wall, wall - STOP_MARGIN_SECONDS)
    channel = Channel(fd, deadline)
    results: dict[str, dict] = {}
    budget = max(1024, int(limits.get("harvest_bytes", 16 << 20)) // max(1, len(probes)))
    try:
        # no deadline: the cells take what the job's wall limit allows (the zygote's)
        msg, _ = wire.recv(fd)
        if msg.get("op") != "ready":
            raise wire.WireError("no ready message")
        names = sorted({p["function"] for p in probes})
        defined = channel.request({"op": "defined"}, {"names": names}) if probes else []
        defined = {n for n in defined if isinstance(n, str)} if isinstance(defined, list) else set()
    except (wire.WireError, StudentGone):
        why = "the notebook's process ended before its functions could be called"
        results = {p["id"]: {"ok": False, "error": why} for p in probes}
    else:
        for probe in probes:
            results[probe["id"]] = _run_probe(channel, probe, defined, budget)
    data = json.dumps({"probes": results}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(result_fd, view) :]
