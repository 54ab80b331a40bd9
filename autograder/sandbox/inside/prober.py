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

Part of the jail's package (:mod:`autograder.sandbox.inside`), like the harness.
"""

from __future__ import annotations

import base64
import builtins
import importlib.abc
import importlib.util
import json
import marshal
import math
import os
import random
import select
import socket
import stat
import sys
import time
import traceback
import types
from typing import NamedTuple

from . import wire

LIBRARY = "autograder.checklib"  # the authors' library, the one package a probe imports
library: dict[
    str, str
] = {}  # its sources, {"record": "...", "__init__": ...}, read by the executor

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
    err = None
    if cls is not None and cls not in (StopIteration, StopAsyncIteration):
        try:
            err = cls(message)
        except Exception:  # noqa: BLE001 - an exception type that wants other arguments
            pass
    err = err or RuntimeError(f"{str(kind)[:100]}: {message}")
    err.scalegrade_student = True  # a probe that lets it escape fails the student, not itself
    return err


def checks_fault(err: BaseException, filename: str) -> str | None:
    """Where an exception that escaped a probe() was raised, when it is the checks' own
    fault (``line 57, in probe``), else None: not what the student's code raised
    (:func:`raised`) nor the engine's word that the student's process misbehaved (raised
    in this module or the wire), but raised by the checks' code or a library it called."""
    if getattr(err, "scalegrade_student", False):
        return None
    ours = (filename, __file__, getattr(wire, "__file__", None))
    known = [f for f in traceback.extract_tb(err.__traceback__) if f.filename in ours]
    if not known or known[-1].filename != filename:
        return None
    return f"line {known[-1].lineno}, in {known[-1].name}"


class Event(NamedTuple):
    """One call of a module P lent to S, or one backward through such a call."""

    kind: str  # "forward" or "vjp"
    module: object  # P's module
    phase: str | None  # the request S was answering: "call", "keep", "backward", ...
    token: int  # the forward call's number (a vjp: the call it differentiates)
    shapes: tuple  # the shapes of the tensors among the arguments (a vjp: of the grads)
    params: dict  # forward: the parameters' values S sent; vjp: name -> gradient given


class Lent:
    """P's torch modules lent to S.  S holds stubs (real ``nn.Module``s with a copy of the
    parameters); each forward runs here, on the arguments and parameter values S sends,
    and each backward is the vector-Jacobian product of one such call, computed here from
    what that call received.  P logs both (:attr:`events`) and sums the parameters'
    gradients (:meth:`grads`): what S claims about its own calls plays no part."""

    MAX_CALLS = 20_000

    def __init__(self):
        self.events: list[Event] = []
        self._calls: dict[int, tuple] = {}  # token -> (module, args, params)
        self._grads: dict[int, dict] = {}  # id(module) -> name -> summed gradient

    def forward(self, module, args, params, phase):
        import torch
        from torch.func import functional_call

        if len(self._calls) >= self.MAX_CALLS:
            raise RuntimeError(f"more than {self.MAX_CALLS} calls of the grader's modules")
        if not isinstance(args, list) or not isinstance(params, dict):
            raise TypeError("malformed call")
        own = dict(module.named_parameters())
        if set(params) != set(own):
            raise ValueError(f"the module's parameters are {sorted(own)}, not {sorted(params)}")
        for name, value in params.items():
            if not isinstance(value, torch.Tensor) or value.shape != own[name].shape:
                raise ValueError(f"parameter {name} must keep its shape {tuple(own[name].shape)}")
        with torch.no_grad():
            out = functional_call(module, params, tuple(args))
        if not isinstance(out, torch.Tensor):
            raise TypeError("a lent module returns one tensor")
        token = len(self._calls) + 1
        self._calls[token] = (module, args, params)
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        self.events.append(Event("forward", module, phase, token, shapes, params))
        return out, token

    def vjp(self, module, token, grads, needs, phase):
        import torch
        from torch.func import functional_call

        call = self._calls.get(token) if type(token) is int else None
        if call is None or call[0] is not module:
            raise ValueError("no such call of this module")
        _, args, params = call
        names = list(params)
        if (
            not isinstance(needs, list)
            or len(needs) != len(args) + len(names)
            or not all(type(x) is bool for x in needs)
            or not isinstance(grads, list)
            or len(grads) != 1
            or not isinstance(grads[0], torch.Tensor)
        ):
            raise TypeError("malformed backward")
        if any(
            need and not isinstance(a, torch.Tensor) for a, need in zip(args, needs, strict=False)
        ):
            raise TypeError("malformed backward")
        inputs = [
            a.detach().requires_grad_(True) if need else a
            for a, need in zip(args, needs, strict=False)
        ]
        values = {
            n: params[n].detach().requires_grad_(need)
            for n, need in zip(names, needs[len(args) :], strict=True)
        }
        wrt = [x for x in inputs + list(values.values()) if isinstance(x, torch.Tensor)]
        wrt = [x for x in wrt if x.requires_grad]
        with torch.enable_grad():
            out = functional_call(module, values, tuple(inputs))
            if grads[0].shape != out.shape:
                raise ValueError(
                    f"a gradient of shape {tuple(grads[0].shape)} for {tuple(out.shape)}"
                )
            got = iter(torch.autograd.grad(out, wrt, grads[0], allow_unused=True) if wrt else ())
        answer = [next(got) if need else None for need in needs]
        sums = self._grads.setdefault(id(module), {})
        given = {}
        for name, g in zip(names, answer[len(args) :], strict=True):
            if g is not None:
                sums[name] = sums[name] + g if name in sums else g.clone()
                given[name] = g
        shapes = (tuple(grads[0].shape),)
        self.events.append(Event("vjp", module, phase, token, shapes, given))
        return answer

    def grads(self, module) -> dict:
        """The gradients of ``module``'s parameters, summed over every backward S asked."""
        return dict(self._grads.get(id(module), {}))


class Channel:
    """P's end of the channel to S: calls out, callbacks in, handles for P's objects."""

    gloo_here: tuple[bool | None, str] | None = None  # P's own gloo test (whose_start)

    def __init__(self, fd: int, deadline: float):
        self.fd = fd
        self.deadline = deadline  # the whole job's: past it, S is not waited for
        self.next_id = 0
        self.objects: dict[int, object] = {}
        self.handles: dict[int, int] = {}  # id(obj) -> handle
        self.kinds: dict[int, str] = {}  # handle -> "callback", "object", "module", "rng"
        self.gone: str | None = None
        self.calls = 0
        self.lent = Lent()
        self.phase: str | None = None  # the request S is answering: "call", "keep", ...
        self.keep_ranks = False  # keep a run's ranks for the next probes (:func:`run`)
        self.probe: str | None = None  # the id of the probe running
        self.pool: list[tuple[int, list[int]]] = []  # ranks kept: (set id, their sockets)
        self.pool_fresh = False  # the ranks kept are fresh ones, from the job's init
        self.pool_owner: str | None = None  # the probe that ran on them last
        self.asked = False  # S was asked something since the last run: kept ranks are stale
        self.fresh: socket.socket | None = None  # to the job's init: it starts fresh ranks

    def close(self) -> None:
        """Nothing here: the executor owns the descriptor (:func:`in_process` replaces it)."""

    def handle(self, obj, kind: str) -> int:
        h = self.handles.get(id(obj))
        if h is None:
            h = len(self.objects)
            self.objects[h] = obj  # kept alive: its id stays its own
            self.handles[id(obj)] = h
            self.kinds[h] = kind
        return h

    def _send(self, header: dict, payload: bytes = b"", to: int | None = None) -> None:
        """To S, or to a rank's process (``to``: its socket; a rank that is gone is heard
        of from that socket, not here)."""
        try:
            wire.send(self.fd if to is None else to, header, payload)
        except wire.WireError as err:
            if to is None:
                self._lost(f"the channel to the notebook's process broke ({err})")

    def _lost(self, why: str):
        self.gone = self.gone or why
        raise StudentGone(self.gone)

    def request(self, header: dict, values: dict, seconds: float | None = None):
        """Send ``header`` with ``values`` encoded; serve callbacks until the answer."""
        if self.gone:
            raise StudentGone(self.gone)
        self.asked = True
        self.next_id += 1
        rid = self.next_id
        enc = wire.Encoder(self.handle)
        body = dict(header, id=rid, **{k: enc.value(v) for k, v in values.items()})
        self._send(body, enc.payload)
        until = min(self.deadline, time.monotonic() + (seconds or ANSWER_SECONDS))
        outer, self.phase = self.phase, header.get("op")
        try:
            return self._answer(rid, until, seconds)
        finally:
            self.phase = outer

    def _answer(self, rid: int, until: float, seconds: float | None):
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
            if op in ("forward", "vjp"):
                self._lent_call(op, msg, payload)
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

    def _lent_call(self, op: str, msg: dict, payload: bytes, to: int | None = None) -> None:
        """A module P lent to S was called, or is differentiated: here, by :class:`Lent`."""
        cid = msg.get("id")
        try:
            h = msg.get("handle")
            if type(h) is not int or self.kinds.get(h) != "module":
                raise KeyError("no such module")
            module = self.objects[h]
            if op == "forward":
                args = wire.decode(msg.get("args"), payload)
                params = wire.decode(msg.get("params"), payload)
                value = self.lent.forward(module, args, params, self.phase)
            else:
                grads = wire.decode(msg.get("grads"), payload)
                needs = wire.decode(msg.get("needs"), payload)
                value = self.lent.vjp(module, msg.get("token"), grads, needs, self.phase)
            self.answer(cid, value, to)
        except StudentGone:
            raise
        except Exception as err:  # noqa: BLE001 - refused: the student's code sees why
            self.refuse(cid, err, to)

    def _callback(self, msg: dict, payload: bytes, to: int | None = None):
        """A stub in S called one of P's objects: run it here, answer with its value.  In
        a ranks run (``to``: the rank's socket), an answer that must wait for the other
        ranks (:class:`Later`) is returned instead, to be sent when it is ready."""
        cid = msg.get("id")
        try:
            if self.kinds.get(msg.get("handle")) not in ("callback", "object"):
                raise KeyError("no such callback")
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
            if isinstance(value, Later):
                if to is None:
                    raise RuntimeError("an answer that waits for other ranks, outside ranks()")
                return value
            self.answer(cid, value, to)
        except StudentGone:
            raise
        except (KeyError, wire.WireError) as err:
            self.refuse(cid, TypeError(str(err)), to)
        except Exception as err:  # noqa: BLE001 - the probe's object raised: the student sees it
            self.refuse(cid, err, to)
        return None

    def answer(self, cid, value, to: int | None = None) -> None:
        enc = wire.Encoder(self.handle)
        node = enc.value(value)
        self._send({"op": "reply", "id": cid, "value": node}, enc.payload, to)

    def refuse(self, cid, err: BaseException, to: int | None = None) -> None:
        message = str(err)[:500]
        fail = {"op": "fail", "id": cid, "type": type(err).__name__, "message": message}
        self._send(fail, b"", to)

    def ranks(
        self,
        name: str,
        rounds: list,
        seconds: float | None,
        gloo: bool = False,
        before=None,
        fresh: bool = False,
        after=None,
    ) -> list:
        """``name`` once per rank and round, the ranks at once, each rank a process forked
        from S, which hands over a socket to each: see :meth:`Student.rounds`; ``fresh``
        (where the job's init serves them): fresh ranks instead (:meth:`_fresh_run`).

        The ranks of a run without gloo are kept for the next check's run (``pool``,
        where ``keep_ranks``: in the probe process, not in :func:`in_process`), which takes
        the first ranks kept and forks only those it lacks.  Kept ranks serve only a run
        that comes straight after theirs, nothing asked of S in between (a seed, a value
        held, a call: a rank forked then would see it, a kept one would not), and never the
        same probe twice (a second run of one probe ends the pool first); a run that did
        not end cleanly (a rank timed out, ended or sent garbage) ends it too.  A gloo
        run's ranks are a group of their own, ended after the run.  ``before()`` is called
        here right before each call is sent to its rank (a meter's reset), ``after()`` once
        the calls are done or given up, before anything is asked of S (a measured call's
        release: S may be stopped)."""
        if self.gone:
            raise StudentGone(self.gone)
        if fresh and self.fresh is not None:
            return self._fresh_run(name, rounds, seconds, before, gloo)
        if not gloo:
            if self.pool and (self.asked or self.pool_owner == self.probe or self.pool_fresh):
                self.end_pool()
            self.asked = False
        world = max(len(calls) for calls in rounds)
        until = min(self.deadline, time.monotonic() + (seconds or ANSWER_SECONDS))
        kept = [] if gloo else [fd for _, socks in self.pool for fd in socks][:world]
        forked = None  # the set forked for this run: (its id, its sockets)
        if len(kept) < world:
            self.next_id += 1
            rid, more = self.next_id, world - len(kept)
            self._send({"op": "ranks", "id": rid, "world": more, "gloo": bool(gloo)})
            socks = self._rank_sockets(rid, more, until)
            if isinstance(socks, Exception):  # S could not start them: every call says why
                return [[socks] * len(calls) for calls in rounds]
            forked = (rid, socks)
            if not gloo:
                self.pool.append(forked)
        if not gloo:
            self.pool_owner = self.probe
        clean, outer, self.phase = False, self.phase, "ranks"
        try:
            socks = kept + (forked[1] if forked else [])
            outcomes, clean = self._run_ranks(
                name, rounds, until, seconds, socks, len(kept), before
            )
            return outcomes
        finally:
            self.phase = outer
            if after is not None:
                after()
            if gloo:
                self._end_set(*forked)
            elif not (clean and self.keep_ranks):
                self.end_pool()

    def end_pool(self, last: bool = False, wait: bool = False) -> None:
        """End the ranks kept for later runs (``last``: no probe comes after: the job's
        end waits for their teardown, which need not yield to anything; ``wait``: S answers
        once every rank it killed, these and earlier ones, has ended, its memory freed)."""
        pool, self.pool, self.pool_owner = self.pool, [], None
        if self.pool_fresh:  # the job's init ends them, and answers once they have ended
            self.pool_fresh = False
            for rid, socks in pool:
                self._fresh_end(rid, socks)
            pool = []
        gone = None
        if wait and not pool and not self.gone:
            self.next_id += 1  # nothing kept: S reaps what it killed before all the same
            pool = [(self.next_id, [])]
        for rid, socks in pool:
            try:
                self._end_set(rid, socks, idle=not (last or wait), wait=wait)
            except StudentGone as err:  # the next sets' sockets close all the same
                gone = gone or err
        if gone is not None:
            raise gone

    def _end_set(self, rid, socks: list[int], idle: bool = True, wait: bool = False) -> None:
        """S kills a set of ranks, before their sockets close here, which would wake them."""
        try:
            if not self.gone:
                self._send({"op": "end", "id": rid, "idle": idle, "wait": wait})
                self._end_ranks(rid)
        finally:
            for fd in socks:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _fresh_run(self, name: str, rounds: list, seconds: float | None, before, gloo) -> list:
        """The rounds on fresh ranks, started by the job's init (:mod:`ranks`): each runs
        the notebook again in namespaces of its own (and joins its set's gloo group), which
        takes what the job's wall limit allows; then the calls have ``seconds``.

        As forked ones, the fresh ranks of a run without gloo are kept for the next check's
        run (``pool``), never for the same probe twice, nor after a run that did not end
        cleanly; what S is asked in between does not matter to them, which never see S.  A
        rank keeps nothing of another's: a kept rank serving the next check holds only
        what its own calls left in it.  A gloo run's ranks are ended after the run."""
        if not gloo and self.pool and (self.pool_owner == self.probe or not self.pool_fresh):
            self.end_pool()
        world = max(len(calls) for calls in rounds)
        kept = [] if gloo else [fd for _, socks in self.pool for fd in socks][:world]
        started = None  # the set started for this run: (its id, its sockets)
        if len(kept) < world:
            self.next_id += 1
            socks = self._fresh_sockets(self.next_id, world - len(kept), gloo)
            if isinstance(socks, Exception):
                return [[socks] * len(calls) for calls in rounds]
            started = (self.next_id, socks)
            if not gloo:
                self.pool.append(started)
                self.pool_fresh = True
        if not gloo:
            self.pool_owner = self.probe
        clean, outer, self.phase = False, self.phase, "ranks"
        try:
            socks = kept + (started[1] if started else [])
            failed = self._await_ready(socks, len(kept))
            if failed is not None:
                return [[failed] * len(calls) for calls in rounds]
            until = min(self.deadline, time.monotonic() + (seconds or ANSWER_SECONDS))
            outcomes, clean = self._run_ranks(name, rounds, until, seconds, socks, world, before)
            return outcomes
        finally:
            self.phase = outer
            if gloo:
                self._fresh_end(*started)
            elif not (clean and self.keep_ranks):
                self.end_pool()

    def _fresh_sockets(self, rid: int, world: int, gloo: bool) -> list[int] | Exception:
        """Ask the job's init for ``world`` fresh ranks: their sockets, or why not."""
        ask = {"op": "ranks", "id": rid, "world": world, "gloo": bool(gloo)}
        try:
            self.fresh.send(json.dumps(ask).encode())
            msg, fds = self._fresh_reply(rid, world)
        except OSError as err:
            return RuntimeError(f"the sandbox could not start the ranks: {err}")
        if msg.get("op") == "ranks" and len(fds) == world:
            return fds
        for fd in fds:
            os.close(fd)
        return RuntimeError(f"the sandbox could not start the ranks: {msg.get('message')}")

    def init_request(self, op: str, fds: int = 0) -> tuple[list[int], dict] | OSError:
        """A request to the job's init (a measured call's step, :mod:`measuring`): the
        descriptors and the message it answered, or why it did not."""
        self.next_id += 1
        rid = self.next_id
        try:
            self.fresh.send(json.dumps({"op": op, "id": rid}).encode())
            msg, got = self._fresh_reply(rid, fds)
        except OSError as err:
            return err
        if msg.get("op") == op and len(got) == fds:
            return got, msg
        for fd in got:
            os.close(fd)
        return OSError(str(msg.get("message") or "the job's init answered something else"))

    def _fresh_reply(self, rid: int, world: int) -> tuple[dict, list[int]]:
        """The job's init's answer to request ``rid`` (within the job's deadline)."""
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([self.fresh], [], [], left)[0]:
            raise OSError("no answer from the job's init in time")
        data, fds, _, _ = socket.recv_fds(self.fresh, 65536, max(world, 1))
        try:
            msg = json.loads(data)
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or msg.get("id") != rid:
            for fd in fds:
                os.close(fd)
            raise OSError("the job's init answered something else")
        return msg, fds

    def _await_ready(self, socks: list[int], kept: int) -> Exception | None:
        """Each fresh rank's word that it ran the notebook and serves (within the job's
        deadline: the notebook's cells take in each rank what they took in S), or that its
        gloo group did not form (:class:`NotStarted`, judged by :func:`whose_start`); the
        first ``kept`` serve already."""
        for r, fd in enumerate(socks[kept:], kept):
            try:
                msg, _ = wire.recv(fd, self.deadline)
            except wire.Late:
                return TimeoutError(f"rank {r} did not run the notebook's cells in time")
            except wire.WireError:
                return RuntimeError(f"rank {r}'s process ended while it ran the notebook's cells")
            if msg.get("op") != "ready":
                return RuntimeError(f"rank {r}'s process sent something else than its start")
            if msg.get("error") is not None:
                return NotStarted(str(msg["error"])[:MAX_ERROR_CHARS])
        return None

    def _fresh_end(self, rid: int, socks: list[int]) -> None:
        """The job's init ends the set (every process of it gone), then the sockets close."""
        try:
            self.fresh.send(json.dumps({"op": "end", "id": rid}).encode())
            self._fresh_reply(rid, 0)
        except OSError:
            pass  # the job's init is gone: so is every rank
        finally:
            for fd in socks:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _rank_sockets(self, rid: int, world: int, until: float) -> list[int] | Exception:
        """The socket of each rank S forked (S hands them over), or what S raised."""
        try:
            msg, _, fds = wire.recv_fds(self.fd, until, world)
        except wire.Late:
            self._lost("the notebook's process did not start its ranks in time")
        except wire.WireError as err:
            self._lost(f"the notebook's process broke off the ranks: {err}")
        if msg.get("op") == "raised" and msg.get("id") == rid and not fds:
            return raised(msg.get("type"), str(msg.get("message", ""))[:MAX_ERROR_CHARS])
        if msg.get("op") == "ranks" and msg.get("id") == rid and len(fds) == world:
            try:
                if all(stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in fds):
                    return fds
            except OSError:
                pass
        for fd in fds:
            os.close(fd)
        self._lost("the notebook's process did not hand over its ranks")

    def _call_rank(self, name: str, sock: int, args: tuple, before=None) -> int:
        """Send a rank its call; the call's id."""
        if before is not None:
            before()
        self.next_id += 1
        enc = wire.Encoder(self.handle)
        value = enc.value(list(args))
        header = {"op": "call", "id": self.next_id, "function": name}
        self._send({**header, "args": value, "kwargs": {"$dict": {}}}, enc.payload, sock)
        return self.next_id

    def _run_ranks(
        self, name: str, rounds: list, until: float, seconds, socks: list, started: int, before
    ) -> tuple[list, bool]:
        """The rounds on these ranks (the first ``started`` are kept from an earlier run:
        they are ready at once); the outcomes, and whether every rank ended its calls
        cleanly (its process may serve another run)."""
        world = len(socks)
        outcomes: list = [[None] * len(calls) for calls in rounds]
        mine = [[k for k, calls in enumerate(rounds) if r < len(calls)] for r in range(world)]
        state = ["starting"] * world  # then "running", "done"
        step = [0] * world  # the index into mine[r] of the rank's call in flight
        call_of: dict[int, int] = {}  # rank -> the id of its call
        waiting: dict[int, tuple] = {}  # rank -> (callback id, Later)
        rank_of = {fd: r for r, fd in enumerate(socks)}
        broken = []  # the ranks whose process cannot serve another run

        def end(r: int, outcome) -> None:  # the rank's call, and every round after it
            for k in mine[r][step[r] :]:
                outcomes[k][r] = outcome
            state[r] = "done"
            waiting.pop(r, None)
            rank_of.pop(socks[r], None)
            broken.append(r)

        for r in range(started):
            call_of[r] = self._call_rank(name, socks[r], rounds[mine[r][0]][r], before)
            state[r] = "running"

        while "starting" in state or "running" in state:
            moved = True
            while moved:  # answer what the other ranks' calls have made ready
                moved = False
                for r, (cid, later) in list(waiting.items()):
                    if later.ready():
                        del waiting[r]
                        self._later(cid, later, socks[r])
                        moved = True
            busy = [r for r in range(world) if state[r] == "running" and r not in waiting]
            if waiting and not busy and "starting" not in state:
                for r, (cid, later) in list(waiting.items()):  # nobody can call any more
                    del waiting[r]
                    why = later.stuck() if later.stuck else "deadlock: no rank can go on"
                    self.refuse(cid, RuntimeError(why), socks[r])
                continue
            left = until - time.monotonic()
            ready = select.select(list(rank_of), [], [], left)[0] if left > 0 else []
            if not ready:
                for r in range(world):
                    if state[r] != "done":
                        late = f"rank {r} did not answer within {seconds or ANSWER_SECONDS:g} s"
                        end(r, TimeoutError(late))
                break
            for fd in ready:
                r = rank_of.get(fd)
                if r is None:
                    continue  # ended while this round was read
                try:
                    msg, payload = wire.recv(fd, until)
                except wire.Closed:
                    end(r, RuntimeError(f"rank {r}'s process ended during the call"))
                    continue
                except wire.Late:
                    late = f"rank {r} did not answer within {seconds or ANSWER_SECONDS:g} s"
                    end(r, TimeoutError(late))
                    continue
                except wire.WireError as err:
                    end(r, RuntimeError(f"rank {r}'s process sent something malformed: {err}"))
                    continue
                sock, op = socks[r], msg.get("op")
                if op == "ready" and state[r] == "starting" and msg.get("error") is not None:
                    end(r, NotStarted(str(msg["error"])[:MAX_ERROR_CHARS]))
                elif op == "ready" and state[r] == "starting":
                    call_of[r] = self._call_rank(name, sock, rounds[mine[r][0]][r], before)
                    state[r] = "running"
                elif op == "callback":
                    later = self._callback(msg, payload, sock)
                    if later is not None:
                        waiting[r] = (msg.get("id"), later)
                elif op in ("forward", "vjp"):
                    self._lent_call(op, msg, payload, sock)
                elif op in ("result", "raised") and msg.get("id") == call_of.get(r):
                    k = mine[r][step[r]]
                    try:
                        if op == "result":
                            outcomes[k][r] = wire.decode(msg.get("value"), payload)
                        else:
                            message = str(msg.get("message", ""))[:MAX_ERROR_CHARS]
                            outcomes[k][r] = raised(msg.get("type"), message)
                    except wire.WireError as err:
                        outcomes[k][r] = TypeError(
                            f"rank {r} returned something that is not data: {err}"
                        )
                    waiting.pop(r, None)
                    if step[r] + 1 < len(mine[r]):  # the same process, its next round
                        step[r] += 1
                        call_of[r] = self._call_rank(
                            name, sock, rounds[mine[r][step[r]]][r], before
                        )
                    else:
                        state[r] = "done"
                        rank_of.pop(sock, None)
        return outcomes, not broken

    def _later(self, cid, later: Later, sock: int) -> None:
        try:
            value = later.value()
        except Exception as err:  # noqa: BLE001 - the probe's object raised: the rank sees it
            self.refuse(cid, err, sock)
        else:
            self.answer(cid, value, sock)

    def _end_ranks(self, rid: int) -> None:
        """Wait for S to have ended the ranks."""
        until = min(self.deadline, time.monotonic() + ANSWER_SECONDS)
        while True:
            try:
                msg, _ = wire.recv(self.fd, until)
            except wire.WireError:
                self._lost("the notebook's process did not end its ranks")
            if msg.get("id") == rid:
                return


VOID_MEASURE = (
    "a process of the notebook ran while its function's call was measured, when every "
    "process but the call's is stopped: the measure is not the call's"
)


class NotStarted(RuntimeError):
    """A rank that could not start: its gloo group did not form on this machine, and P's
    own gloo group did not either (:func:`whose_start`)."""


GLOO_CHECK_SECONDS = 30.0  # P's own gloo group (gloo_starts_here): start-up, one all-reduce
GLOO_CHECK_WORLD = 2


def gloo_starts_here(until: float) -> tuple[bool | None, str]:
    """Whether gloo starts on this machine, found by P itself, whatever the student's code
    did: GLOO_CHECK_WORLD processes forked from P (never from S: no student code runs in
    them) join a gloo group over loopback, as the harness's ranks do, and all-reduce one
    number.  (True, ""): they did.  (False, why): loopback does not connect here, or
    torch.distributed itself failed in them: the machine's failure.  (None, why): the test
    could not tell (P could not fork, a process ended without a word or ran out of time),
    which excuses nothing."""
    import signal
    import socket

    start = time.monotonic()
    if until <= start:
        return None, "no time left for the test"
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    pids, pipes = [], []
    try:
        try:
            server.bind(("127.0.0.1", 0))
            server.listen(GLOO_CHECK_WORLD + 1)
            with socket.create_connection(server.getsockname(), timeout=1.0):
                pass
            server.accept()[0].close()
        except OSError as err:
            return False, f"loopback does not connect: {_error_text(err)}"
        for rank in range(GLOO_CHECK_WORLD):
            r, w = os.pipe()
            try:
                pid = os.fork()
            except OSError as err:
                os.close(r)
                os.close(w)
                return None, f"could not fork: {_error_text(err)}"
            if pid == 0:  # pragma: no cover - the child reports through its pipe, then ends
                os.close(r)
                _gloo_check_rank(server, rank, w)
                os._exit(1)
            os.close(w)
            pids.append(pid)
            pipes.append(r)
        reports: dict[int, bytes] = {}
        while len(reports) < len(pipes):
            left = until - time.monotonic()
            waiting = [fd for fd in pipes if fd not in reports]
            ready = select.select(waiting, [], [], left)[0] if left > 0 else []
            if not ready:
                return None, f"no answer within {until - start:.0f} s"
            for fd in ready:
                reports[fd] = os.read(fd, 4096)
        words = [reports[fd].decode("utf-8", "replace") for fd in pipes]
        if all(word == "ok" for word in words):
            return True, ""
        failed = [word[len("error:") :] for word in words if word.startswith("error:")]
        if failed:
            return False, failed[0]
        return None, "a process of the test ended without a word"
    finally:
        server.close()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        for fd in pipes:
            os.close(fd)


def _gloo_check_rank(server, rank: int, w: int) -> None:  # pragma: no cover - in a child
    """In a process forked from P: join P's own gloo group, all-reduce 1; "ok" or
    "error:why" on ``w``, then end."""
    try:
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        timeout = timedelta(seconds=GLOO_CHECK_SECONDS / 2)
        host, port = server.getsockname()
        listening = server.fileno() if rank == 0 else None
        if rank:
            server.close()  # rank 0 serves the store on it, as in the harness
        store = dist.TCPStore(host, port, GLOO_CHECK_WORLD, rank == 0, timeout,
                              wait_for_workers=False, master_listen_fd=listening)  # fmt: skip
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=GLOO_CHECK_WORLD, timeout=timeout
        )
        one = torch.ones(1, dtype=torch.float64)
        dist.all_reduce(one)
        word = "ok" if one.item() == GLOO_CHECK_WORLD else f"error:all_reduce gave {one.item()}"
    except BaseException as err:  # noqa: BLE001 - what the machine's gloo says
        word = f"error:{_error_text(err)}"
    try:
        os.write(w, word.encode("utf-8")[:4096])
    finally:
        os._exit(0)


def whose_start(channel: Channel, outcomes: list, until: float) -> list:
    """A gloo run's outcomes, each :class:`NotStarted` judged: a rank's process ran the
    notebook, so its word that its group did not form is the student's to give (a notebook
    that patches ``torch.distributed.TCPStore`` makes every rank say it).  It stays a
    NotStarted, the machine's failure, only when P's own gloo group does not form either
    (:func:`gloo_starts_here`, run once per job, after the student's ranks have ended);
    otherwise it is the student's failure, like anything the rank raised."""
    if not any(isinstance(v, NotStarted) for calls in outcomes for v in calls):
        return outcomes
    if channel.gloo_here is None:
        channel.gloo_here = gloo_starts_here(min(until, time.monotonic() + GLOO_CHECK_SECONDS))
    starts, why = channel.gloo_here

    def judged(v):
        if not isinstance(v, NotStarted):
            return v
        if starts is False:
            return NotStarted(f"{v} (the grader's own gloo group could not start either: {why})")
        told = (
            "gloo starts on this machine (the grader's own group formed)"
            if starts
            else f"the grader could not confirm that gloo cannot start here ({why})"
        )
        err = RuntimeError(
            f"the rank could not join its gloo group ({v}), but {told}: something in the "
            "notebook's process stopped it"
        )
        err.scalegrade_student = True
        return err

    return [[judged(v) for v in calls] for calls in outcomes]


class GlooRing:
    """Stands for a rank's ``comm`` over its gloo group, which S makes in each rank
    (``send_recv(chunk)``: to rank + 1, from rank − 1, by isend/irecv)."""

    __wire_builtin__ = "gloo_ring"


class Later:
    """A callback's answer that waits for the other ranks of a :meth:`Student.ranks` run
    (a ring's ``send_recv``, an all-reduce): ``ready()`` says when it can be given,
    ``value()`` gives it, and ``stuck()``, if given, says why it never can (a deadlock)."""

    def __init__(self, ready, value, stuck=None):
        self.ready, self.value, self.stuck = ready, value, stuck


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

    def call(self, *args, grad: bool = False, keep: int | None = None, **kwargs):
        """Call, and return what happened as a record (:mod:`autograder.checklib`): the
        value's numbers, shape and dtype, or the exception raised, and the seconds taken.
        ``grad``: differentiate in S too (:meth:`gradient`), the gradients in ``.grad``.
        ``keep``: the most numbers the record keeps (``checklib.record.KEEP``)."""
        from autograder.checklib.record import KEEP, Record

        start = time.monotonic()
        grads = why = None
        try:
            if grad:
                value, grads, why = self.gradient(*args, **kwargs)
            else:
                value = self(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - whatever the call raised is its record
            return Record.of(err, seconds=time.monotonic() - start)
        keep = KEEP if keep is None else keep
        rec = Record.of(value, seconds=time.monotonic() - start, keep=keep)
        if grad:
            gs = (
                None
                if grads is None
                else tuple(None if g is None else Record.of(g, keep=keep) for g in grads)
            )
            rec = rec.with_grad(gs, why or "the value carries no gradient")
        return rec

    def calls(
        self,
        calls: list,
        seconds: float | None = None,
        keep: int | None = None,
        shuffle: bool = True,
    ) -> list:
        """Many calls in one round trip (:meth:`map`), each as :meth:`call`'s record, in
        the order of ``calls``; one by one when the batch as a whole fails (a value that
        is not data fails it), so that each call gets its own error.  ``shuffle``: S gets
        the calls in an order drawn here from the system's entropy, so that state a
        function keeps across calls cannot line up with what the check expects (a
        stateless function answers the same in any order)."""
        from autograder.checklib.record import KEEP, Record

        keep = KEEP if keep is None else keep
        order = list(range(len(calls)))
        if shuffle:
            random.SystemRandom().shuffle(order)
        asked = [calls[i] for i in order]
        try:
            answers = [Record.of(a, keep=keep) for a in self.map(asked, seconds)]
        except Exception:  # noqa: BLE001 - the batch's answer; the calls one by one say why
            answers = [self.call(*args, keep=keep) for args in asked]
        records: list = [None] * len(calls)
        for i, rec in zip(order, answers, strict=True):
            records[i] = rec
        return records

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

    def run(self, *args, **kwargs) -> Held:
        """Call, and let S keep what the function returns (a tensor to differentiate, an
        object whose methods and parameters P then uses): :class:`Held`."""
        self._channel.calls += 1
        values = {"args": list(args), "kwargs": kwargs}
        return _held(self._channel, {"op": "keep", "function": self.__name__}, values)

    def hold(self, value) -> Held:
        """Put ``value`` in S and keep it there (a leaf tensor whose ``.grad`` P reads
        after a backward); pass the :class:`Held` as an argument to use it."""
        return _held(self._channel, {"op": "hold"}, {"value": value})

    @property
    def events(self) -> list[Event]:
        """Every call of the torch modules P lent to S, and every backward through them."""
        return self._channel.lent.events

    def grads(self, module) -> dict:
        """The parameters' gradients of a module P lent, summed over S's backward passes."""
        return self._channel.lent.grads(module)

    NotStarted = NotStarted

    def ranks(
        self, calls: list, seconds: float | None = None, gloo: bool = False, fresh: bool = True
    ) -> list:
        """One call per rank, all running at once, each rank a process of its own
        (``calls[r]``: rank r's argument tuple, sent to that rank only).  The ranks'
        callbacks run here, where a callback may answer :class:`Later`: its answer waits
        for the other ranks (the router of a ring, an all-reduce).  Returns each rank's
        value, or the exception it raised (TimeoutError past ``seconds``).

        ``fresh`` (the default): each rank is started by the job's init, never by the
        student's process, and runs the notebook again in namespaces of its own (with
        ``__name__ == "__mp_main__"``, as a worker of torch.multiprocessing.spawn), sharing
        no file, memory, descriptor or process with S or another rank: whatever the ranks
        exchange goes through this process (:mod:`ranks`).  ``fresh=False``: the ranks are
        forked from S, at a fork's cost instead of a notebook's, and may have served the
        run of the check before, never one of this check's (:meth:`Channel.ranks`); they
        can reach each other outside the comm, so the check must judge what the comm
        delivered.  Where the sandbox has no init (its process mode, a probe in S), every
        run is so.

        ``gloo``: the ranks first join a torch.distributed gloo group of their own (fresh
        ranks share one network namespace, made for the set: gloo needs a network, and
        that loopback is all they share), and :meth:`gloo_ring` stands for a
        comm over it; a rank whose group does not form answers :class:`NotStarted` (the
        machine's failure, not the student's) only when P's own gloo group does not form
        either, else a RuntimeError that is the student's (:func:`whose_start`)."""
        return self.rounds([calls], seconds, gloo, fresh)[0]

    def rounds(
        self, rounds: list, seconds: float | None = None, gloo: bool = False, fresh: bool = True
    ) -> list:
        """Several calls per rank, as :meth:`ranks` makes one: ``rounds[k][r]`` is rank r's
        argument tuple in round k, and each rank makes its calls in order, in one process
        (a rank starts its next round once its call has returned, whatever the other
        ranks do).  For properties that need no fresh process per call: one process per
        rank instead of one per call.  A round may have fewer calls than the largest:
        ranks 0 … n − 1 make them and the others skip it (t = 2, 4, 8 on 8 processes, not
        14); with ``gloo`` every round has one call per rank of the group.  Returns
        ``out[k][r]``; a rank whose process ended, timed out or never started answers that
        for every round left."""
        rounds = [[tuple(c) for c in calls] for calls in rounds]
        if not rounds or not all(rounds):
            raise ValueError("every round needs a call for at least one rank")
        if gloo and len({len(calls) for calls in rounds}) != 1:
            raise ValueError("a gloo run needs one call per rank of its group in every round")
        self._channel.calls += sum(len(calls) for calls in rounds)
        outcomes = self._channel.ranks(self.__name__, rounds, seconds, gloo, fresh=fresh)
        if gloo:  # the ranks have ended: a start failure they told is judged here
            outcomes = whose_start(self._channel, outcomes, self._channel.deadline)
        return outcomes

    @staticmethod
    def gloo_ring() -> GlooRing:
        """An argument for a gloo :meth:`ranks` run: each rank's ``comm`` over the group."""
        return GlooRing()

    @staticmethod
    def later(ready, value, stuck=None) -> Later:
        """What a callback of a :meth:`ranks` run answers when its answer waits for the
        other ranks: see :class:`Later`."""
        return Later(ready, value, stuck)

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

    def variable(self, name: str) -> tuple:
        """A global of the notebook, as a test cell reads it: ``("function",)`` (call it
        through :meth:`sibling`), ``("module", NAME)``, or ``("value", DATA)``; NameError
        when the notebook has no such name, TypeError when its value is not data."""
        out = self._channel.request({"op": "variable"}, {"name": str(name)})
        kinds = {"function": 1, "module": 2, "value": 2}
        if not isinstance(out, list | tuple) or not out or kinds.get(out[0]) != len(out):
            raise TypeError("the notebook's process answered a variable with something else")
        if out[0] == "module" and not isinstance(out[1], str):
            raise TypeError("the notebook's process named a module with something else")
        return tuple(out)

    def unbind(self, name: str) -> None:
        """A test cell's ``del name``, in the notebook's namespace (it can be bound again
        by name: :meth:`bind`)."""
        self._channel.request({"op": "unbind"}, {"name": str(name)})

    def bind(self, name: str, value=None, *, source: str | None = None) -> None:
        """A test cell's ``name = value``, in the notebook's namespace: ``value`` as data,
        or, with ``source``, what the notebook's name ``source`` holds (or held before
        :meth:`unbind`): a function restored after a test hid it."""
        self._channel.request({"op": "bind"}, {"name": str(name), "source": source, "value": value})

    def seed(self, stream: int) -> None:
        """Seed the global generators of S (numpy, random, torch): a student who uses them
        instead of the generator given gets the same numbers in every run."""
        self._channel.request({"op": "seed"}, {"stream": int(stream)})

    def measured(self, *args, **kwargs):
        """Call, and measure from outside the student's process what the call took:
        (the value, the peak bytes).  The peak is the most memory the student's process
        and its children held during the call, above what they held when it began
        (decoding the arguments and encoding the value included); None when this sandbox
        has no meter (:attr:`meter` says why).  Raises what the function raised, its
        ``peak_bytes`` set (code that raises may have taken memory first).

        With a memory cgroup as the meter, the call runs in a process forked from S for
        it: what S made before the call, that process shares with S, so freeing it there
        makes no room for what the call takes.  Where the job's init serves it, that
        process is forked into a cgroup made for the call, counted from its making, every
        other process of the job stopped during the call (:meth:`_measured_apart`,
        :mod:`measuring`); elsewhere the meter is the job's cgroup, reset before the fork.
        Either way what the forked process takes before the call (a hook of
        ``os.register_at_fork``) counts too, with the fork's own page tables and copied
        pages (about 3 MB with torch loaded)."""
        gauge = meter if meter is not None else Meter.this_process()
        base: list = [None]

        def reset() -> None:
            base[0] = gauge.reset()

        try:
            if gauge.kind == "cgroup" and not kwargs:
                # a kept rank may hold memory of its own, and a rank being torn down frees
                # its own during the call: every one ends first
                self._channel.end_pool(wait=True)
                self._channel.calls += 1
                if self._channel.fresh is not None:
                    held = self._channel.init_request("hold", fds=1)
                    if not isinstance(held, OSError):  # else the job's cgroup, as without init
                        return self._measured_apart(args, Meter.of_call(held[0][0], gauge.note))
                reset()  # before the fork: what the new process takes before the call counts
                [[value]] = self._channel.ranks(self.__name__, [[args]], None)
                if isinstance(value, BaseException):
                    value.peak_bytes = gauge.since(base[0])
                    raise value
                return value, gauge.since(base[0])
            self._channel.calls += 1
            reset()
            try:
                value = self._channel.request(
                    {"op": "call", "function": self.__name__},
                    {"args": list(args), "kwargs": kwargs},
                )
            except Exception as err:
                err.peak_bytes = gauge.since(base[0])
                raise
            return value, gauge.since(base[0])
        finally:
            if gauge is not meter:
                gauge.close()

    def _measured_apart(self, args: tuple, gauge: Meter):
        """:meth:`measured` where the job's init serves it (:mod:`measuring`): the call's
        process forked into a cgroup made for it (its peak counts from the moment S moved
        there, never reset: nothing S or its forks take after that can hide), every other
        process of the job stopped during the call and checked after not to have run."""
        channel, value, peak, released = self._channel, None, None, []

        def measure() -> None:  # the call's process is forked: the others stop
            if isinstance(channel.init_request("measure"), OSError):
                raise RuntimeError(f"{VOID_MEASURE} (one did not stop)")

        def release() -> None:  # the call answered, or not: the peak, then S goes on
            nonlocal peak
            if not released:
                peak = gauge.since(base)
                released.append(channel.init_request("release"))

        base = 0  # a cgroup made for the call: what S and its forks took since it was made
        try:
            [[value]] = channel.ranks(self.__name__, [[args]], None, before=measure, after=release)
        finally:
            release()
            gauge.close()
            channel.end_pool()  # the call's process serves nothing after
        if isinstance(released[0], OSError) or released[0][1].get("ran"):
            why = "the sandbox could not tell" if isinstance(released[0], OSError) else "one ran"
            raise RuntimeError(f"{VOID_MEASURE} ({why})")
        if isinstance(value, BaseException):
            value.peak_bytes = peak
            raise value
        return value, peak

    @property
    def meter(self) -> str:
        """How :meth:`measured` measures memory, or why it cannot (for messages)."""
        return meter.note if meter is not None else Meter.THIS_PROCESS


class Held:
    """A value S keeps for P, by handle.  ``value`` is its copy when it is data (None
    otherwise), ``type`` the name of its type.  Passed as an argument, it is S's own
    object again."""

    def __init__(self, channel: Channel, handle: int, value, type_name: str):
        self._channel = channel
        self._handle = handle
        self.value = value
        self.type = type_name

    @property
    def __wire_held__(self) -> int:
        return self._handle

    def _ask(self, op: str, values: dict, **fields):
        return self._channel.request({"op": op, "held": self._handle, **fields}, values)

    def run(self, *args, method: str | None = None, **kwargs) -> Held:
        """Call the kept object (or its ``method``), and keep the result."""
        self._channel.calls += 1
        header = {"op": "keep", "held": self._handle, "method": method}
        return _held(self._channel, header, {"args": list(args), "kwargs": kwargs})

    def backward(self, cotangent=None) -> None:
        """Backpropagate from the kept tensor, in S (``cotangent``: its gradient); S then
        drops it, its graph spent."""
        self._ask("backward", {"cotangent": cotangent})

    def read(self, *path: str):
        """An attribute of the kept object, as data: ``read("grad")``, ``read("A")``."""
        return self._ask("read", {"path": list(path)})

    def parameters(self, clear: bool = False) -> list[tuple]:
        """The kept module's ``named_parameters()``: (name, value, requires_grad, grad);
        ``clear``: then set every ``.grad`` to None, as ``zero_grad()`` does."""
        out = self._ask("parameters", {}, clear=bool(clear))
        if not isinstance(out, list) or not all(
            isinstance(x, tuple) and len(x) == 4 and isinstance(x[0], str) for x in out
        ):
            raise TypeError("the notebook's process answered its parameters malformed")
        return out

    def release(self) -> None:
        """S may drop the kept value (a loss and its graph, once differentiated)."""
        self._ask("release", {})

    def assign(self, values: dict) -> None:
        """Copy P's numbers into the kept object's tensors, in place and without a graph:
        ``{"A": a, "base.weight": w}``."""
        self._ask("assign", {"values": dict(values)})


def _held(channel: Channel, header: dict, values: dict) -> Held:
    out = channel.request(header, values)
    if not (isinstance(out, tuple) and len(out) == 3 and type(out[0]) is int):
        raise TypeError("the notebook's process answered a kept value malformed")
    return Held(channel, out[0], out[1], str(out[2])[:200])


def in_process(ns: dict, server, seconds: float = 600.0) -> Channel:
    """A channel to functions of this very process: S's server (``server``, the harness's
    ``_Server``, on ``ns``) answers in a thread, over a socket pair and the same wire.  For
    tests, check authors trying a reference and bench/gpu_check.py, never for a student's
    code: it protects nothing, since both ends share a process.
    ``channel.close()`` ends the thread (so does the channel's collection)."""
    import socket
    import threading
    import weakref

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    thread = threading.Thread(
        target=server(theirs.fileno(), ns).loop, name="scalegrade-student", daemon=True
    )
    thread.start()
    msg, _ = wire.recv(mine.fileno(), time.monotonic() + 30.0)
    if msg.get("op") != "ready":
        raise RuntimeError("the in-process server did not start")
    channel = Channel(mine.fileno(), time.monotonic() + seconds)
    channel.close = weakref.finalize(channel, _close_pair, mine, theirs, thread)
    return channel


def _close_pair(mine, theirs, thread) -> None:
    mine.close()  # the server's next read fails: it returns
    thread.join(10.0)
    theirs.close()


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
    if module == LIBRARY + ".record":  # a checklib Record: its own plain data
        return _plain(value.plain(), depth)
    raise TypeError(f"a probe result of type {type(value).__name__}")


_MAGIC = importlib.util.MAGIC_NUMBER.hex()  # the bytecode version of this interpreter


def checks_filename(probe_id: str) -> str:
    """The file name of a probe's checks in its code objects and tracebacks."""
    return f"<checks {probe_id}>"


def compiled(source: str, probe_id: str) -> dict:
    """What the grader adds to a probe's request: its checks compiled once per batch (the
    probe process would compile them once per submission, 2-8 ms a check), as marshal
    data for this interpreter's bytecode.  Nothing when the source does not compile: the
    probe process then reports the error as the probe's."""
    try:
        code = compile(source, checks_filename(probe_id), "exec")
    except (SyntaxError, ValueError):
        return {}
    return {"code": base64.b64encode(marshal.dumps(code)).decode(), "magic": _MAGIC}


def _code(probe: dict, filename: str) -> types.CodeType:
    """The probe's code: the grader's compilation where it is this interpreter's bytecode
    (a container's Python may be another version), else compiled here from the source."""
    blob = probe.get("code")
    if type(blob) is str and probe.get("magic") == _MAGIC:
        try:
            code = marshal.loads(base64.b64decode(blob, validate=True))
        except (ValueError, EOFError, TypeError):
            code = None
        if type(code) is types.CodeType and code.co_filename == filename:
            return code
    return compile(probe["source"], filename, "exec")


def _run_probe(channel: Channel, probe: dict, defined: set[str], budget: int) -> dict:
    name = probe["function"]  # None: the checks read the notebook's names (test cells)
    if name is not None and name not in defined:
        return {"ok": False, "error": f"function {name} is not defined"}
    module = types.ModuleType(f"scalegrade_checks_{probe['id']}".replace("-", "_"))
    module.__file__ = checks_filename(probe["id"])
    sys.modules[module.__name__] = module
    channel.probe = probe["id"]
    try:
        exec(_code(probe, module.__file__), module.__dict__)  # noqa: S102
        params = json.loads(probe["params_json"])
        result = _plain(module.probe(Student(channel, name), probe["seed"], params))
    except StudentGone as err:
        return {"ok": False, "error": str(err)[:MAX_ERROR_CHARS]}
    except BaseException as err:  # noqa: BLE001 - the checks' error is this probe's result
        at = checks_fault(err, module.__file__)
        if at is not None:
            error = f"{at}: {_error_text(err)}"[:MAX_ERROR_CHARS]
            return {"ok": False, "error": error, "fault": "checks"}
        return {"ok": False, "error": _error_text(err)}
    finally:
        sys.modules.pop(module.__name__, None)
    text = json.dumps(result)
    if len(text) > budget:
        return {"ok": False, "error": f"probe result larger than {budget} bytes"}
    return {"ok": True, "result": result}


class _Library(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``autograder.checklib`` in P from the sources the executor read before the
    mounts hid the project: ``autograder`` is an empty package here, and the checklib is
    all of it a probe can import."""

    def find_spec(self, name, path=None, target=None):
        if name == "autograder":
            return importlib.util.spec_from_loader(name, self, is_package=True)
        sub = name.removeprefix(LIBRARY).lstrip(".") or "__init__"
        if (name == LIBRARY or name.startswith(LIBRARY + ".")) and sub in library:
            return importlib.util.spec_from_loader(name, self, is_package=sub == "__init__")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == "autograder":
            return
        sub = module.__name__.removeprefix(LIBRARY).lstrip(".") or "__init__"
        exec(compile(library[sub], f"<checklib {sub}>", "exec"), module.__dict__)  # noqa: S102


def serve_library(sources: dict[str, str]) -> None:
    """Keep the authors' library's sources, which the executor read before the mounts hid
    the project, for the probe process to import (:func:`install_library`)."""
    library.clear()
    library.update(sources)


def install_library() -> None:
    """Let a probe import the authors' library (:class:`_Library`); a no-op where the
    real package is importable (a probe run in the grader's process, for tests)."""
    if library and not any(isinstance(f, _Library) for f in sys.meta_path):
        sys.meta_path.insert(0, _Library())


def run(
    probes: list[dict], fd: int, result_fd: int, limits: dict, fresh: int | None = None
) -> None:
    """Wait for S to have run the cells (and sent its harvest), then run each probe in turn;
    write the results once.  With no probe, P only waits: S then ends when P does.
    ``fresh``: P's socket to the job's init, which starts fresh ranks (namespaces mode)."""
    start = time.monotonic()
    wall = float(limits["wall_seconds"])
    # past this, S is not waited for: P reports and ends, and the executor ends S (after
    # its grace, SERVE_GRACE_SECONDS) before the job's wall limit would discard everything
    deadline = start + max(0.5 * wall, wall - STOP_MARGIN_SECONDS)
    install_library()
    channel = Channel(fd, deadline)
    channel.keep_ranks = True
    if fresh is not None:
        channel.fresh = socket.socket(fileno=fresh)
    results: dict[str, dict] = {}
    budget = max(1024, int(limits.get("harvest_bytes", 16 << 20)) // max(1, len(probes)))
    try:
        # no deadline: the cells take what the job's wall limit allows (the zygote's)
        msg, _ = wire.recv(fd)
        if msg.get("op") != "ready":
            raise wire.WireError("no ready message")
        names = sorted({p["function"] for p in probes} - {None})
        defined = channel.request({"op": "defined"}, {"names": names}) if probes else []
        defined = {n for n in defined if isinstance(n, str)} if isinstance(defined, list) else set()
    except (wire.WireError, StudentGone):
        why = "the notebook's process ended before its functions could be called"
        results = {p["id"]: {"ok": False, "error": why} for p in probes}
    else:
        for probe in probes:
            results[probe["id"]] = _run_probe(channel, probe, defined, budget)
        try:
            channel.end_pool(last=True)
        except StudentGone:
            pass  # S ended: so did its ranks
    data = json.dumps({"probes": results}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(result_fd, view) :]


# --------------------------------------------------------------------------- memory


class Meter:
    """The memory of the student's process S, read by P through files the executor opened
    as root and gave to P alone (S never holds them).

    ``kind`` "cgroup": ``fd`` is the peak file of the memory cgroup that holds S and its
    children (v1 memory.max_usage_in_bytes, v2 memory.peak): writing resets it to the
    usage now; reading gives the peak since.  Nothing S does can lower it.
    ``kind`` "vmhwm" (no cgroup): ``fd`` is S's /proc/PID/clear_refs (writing 5 resets the
    peak RSS) and ``read_fd`` its /proc/PID/status (VmHWM): S's children are not counted,
    and S itself can reset it; the note says so.  ``kind`` None: no meter, and why.
    """

    THIS_PROCESS = (
        "the VmHWM of this process, which runs the functions itself (tests and authors; "
        "it protects nothing)"
    )

    def __init__(self, kind: str | None, fd: int = -1, read_fd: int = -1, note: str = ""):
        self.kind = kind if kind in ("cgroup", "vmhwm") else None
        self.fd, self.read_fd = fd, read_fd if read_fd >= 0 else fd
        self.note = note or ("no memory meter" if self.kind is None else self.kind)
        self._own: tuple[int, ...] = ()  # descriptors this meter opened, closed by close()

    @classmethod
    def of_call(cls, fd: int, note: str) -> Meter:
        """A measured call's own cgroup (:mod:`measuring`): its peak file, closed by
        :meth:`close`."""
        gauge = cls("cgroup", fd, fd, note)
        gauge._own = (fd,)
        return gauge

    @classmethod
    def this_process(cls) -> Meter:
        """Where the functions run in this very process (:func:`in_process`): its own VmHWM."""
        try:
            reset = os.open("/proc/self/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as err:
            return cls(None, note=f"no memory meter: /proc/self/clear_refs: {err.strerror}")
        try:
            status = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            os.close(reset)
            return cls(None, note=f"no memory meter: /proc/self/status: {err.strerror}")
        gauge = cls("vmhwm", reset, status, cls.THIS_PROCESS)
        gauge._own = (reset, status)
        return gauge

    def close(self) -> None:
        for fd in self._own:
            os.close(fd)
        self._own = ()

    def _read(self) -> int | None:
        try:
            text = os.pread(self.read_fd, 8192, 0).decode("ascii", "replace")
            if self.kind == "cgroup":
                return int(text.strip())
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
        except (OSError, ValueError, IndexError):
            pass
        return None

    def reset(self) -> int | None:
        """Reset the peak to the usage now; that usage in bytes (None: no meter)."""
        if self.kind is None:
            return None
        try:
            os.pwrite(self.fd, b"0" if self.kind == "cgroup" else b"5", 0)
        except OSError as err:
            self.kind, self.note = None, f"no memory meter: the reset failed ({err.strerror})"
            return None
        return self._read()

    def since(self, base: int | None) -> int | None:
        """The peak since :meth:`reset` returned ``base``, above ``base`` (bytes)."""
        if base is None or self.kind is None:
            return None
        peak = self._read()
        return None if peak is None else max(0, peak - base)


# The probe process's meter, set by the executor (a cgroup's peak, S's VmHWM, or none and
# why); None elsewhere: the functions run in this process, measured by its own VmHWM.
meter: Meter | None = None
