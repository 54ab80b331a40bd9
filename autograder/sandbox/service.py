"""A warm sandbox that outlives one command.

``scalegrade sandbox-serve SOCKET`` starts a :class:`~autograder.sandbox.Sandbox` (its
executor with numpy, IPython and what ``--preload`` names, torch for instance) and keeps
it running; ``scalegrade grade ... --executor service --service SOCKET`` then sends it each
submission instead of starting a sandbox of its own, so a resubmission or a
one-notebook run no longer waits for the executor's imports.  Only the sandbox step moves,
as with ``--executor dask``: keys, the comparison and the gradebook stay with the grader.

Each run is the same as a local one: a fresh isolated child of the warm executor, nothing
shared between two students.  The service refuses what would make a run differ from the
command's own sandbox: a folder of the batch (keys, submissions, results) that its
sandbox does not hide, or other limits.  It answers only processes of its own user (the
socket is 0600, and each connection's peer is checked), and its socket lies under the
folders every sandbox hides (/run, the temporary folder), out of the notebooks' reach.

The channel is the probe channel's framing (:mod:`.inside.wire`): a JSON header, and the
plan and the notebook's bytes as payload; the outcome comes back as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import struct
import tempfile
import threading
from pathlib import Path

from autograder.sandbox import Limits, Outcome, Plan, Probe, Sandbox, SandboxError
from autograder.sandbox.inside import wire
from autograder.sandbox.remote import RemoteRunner

PROTOCOL = 1


def plan_to_json(plan: Plan) -> bytes:
    return json.dumps(dataclasses.asdict(plan)).encode()


def plan_from_json(data: bytes) -> Plan:
    doc = json.loads(data)
    probes = tuple(
        Probe(**{**p, "preload": tuple(p.get("preload", ()))}) for p in doc.get("probes", ())
    )
    return Plan(tuple(doc["variables"]), probes)


# --------------------------------------------------------------------------- the service


def _peer_uid(conn: socket.socket) -> int:
    cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", cred)[1]  # (pid, uid, gid)


def _answer(conn: socket.socket, sandbox: Sandbox) -> None:
    """One client's requests, in turn, until it closes."""
    fd = conn.fileno()
    with conn:
        if _peer_uid(conn) != os.geteuid():
            _refuse(conn, "this service answers its own user only")
            return
        while True:
            try:
                msg, payload = wire.recv(fd)
            except wire.WireError:
                return
            op = msg.get("op")
            try:
                if op == "hello":
                    wire.send(fd, {"op": "hello", **describe(sandbox)})
                elif op == "warm":
                    sandbox.warm([str(m) for m in msg.get("modules", [])])
                    wire.send(fd, {"op": "warm"})
                elif op == "run":
                    outcome = _run(sandbox, msg, payload)
                    wire.send(
                        fd, {"op": "outcome"}, json.dumps(dataclasses.asdict(outcome)).encode()
                    )
                else:
                    wire.send(fd, {"op": "refused", "why": f"unknown request {str(op)[:40]!r}"})
            except wire.WireError:
                return
            except (KeyError, TypeError, ValueError) as err:
                wire.send(fd, {"op": "refused", "why": f"a malformed request: {err}"})


REFUSED_DRAIN_BYTES = 1 << 16  # what is read, and dropped, of a refused client's requests
REFUSED_DRAIN_SECONDS = 1.0


def _refuse(conn: socket.socket, why: str) -> None:
    """Tell a client why it is refused, then read (and drop) what it sent until it closes,
    a second or 64 KiB at most: closing a Unix socket with its requests unread resets the
    client's end, which then never reads why."""
    try:
        wire.send(conn.fileno(), {"op": "refused", "why": why})
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(REFUSED_DRAIN_SECONDS)
        left = REFUSED_DRAIN_BYTES
        while left > 0 and (chunk := conn.recv(min(left, 4096))):
            left -= len(chunk)
    except (OSError, wire.WireError):
        pass


def _run(sandbox: Sandbox, msg: dict, payload: bytes) -> Outcome:
    split = int(msg["plan_bytes"])
    plan = plan_from_json(payload[:split])
    work = tempfile.mkdtemp(prefix="scalegrade-service-")
    try:
        path = Path(work) / (os.path.basename(str(msg["name"])) or "notebook.ipynb")
        path.write_bytes(payload[split:])
        return sandbox.run(path, plan)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def describe(sandbox: Sandbox) -> dict:
    """What a client checks before it sends a run: the folders hidden, the limits."""
    return {
        "protocol": PROTOCOL,
        "isolation": sandbox.isolation,
        "hidden": sandbox.hidden(),
        "limits": dataclasses.asdict(sandbox.limits),
        "jobs": sandbox.jobs,
    }


def serve(path: Path, sandbox: Sandbox, stop: threading.Event | None = None) -> None:
    """Answer clients on the Unix socket ``path`` until ``stop`` is set (or forever)."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not path.is_socket():
            raise SandboxError(f"{path} exists and is not a socket: choose another path")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(str(path)) == 0:
                raise SandboxError(f"a sandbox service already listens on {path}")
        path.unlink()  # a stale socket of a service that is gone
    # bound, made the owner's and listening under a name of its own, then moved: once
    # ``path`` exists it answers, and only its owner (whom _answer checks all the same)
    staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(staging))
        os.chmod(staging, 0o600)
        server.listen(64)
        os.replace(staging, path)
    except BaseException:
        server.close()
        staging.unlink(missing_ok=True)
        raise
    server.settimeout(0.2)
    try:
        while stop is None or not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            threading.Thread(target=_answer, args=(conn, sandbox), daemon=True).start()
    finally:
        server.close()
        path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- the client


class ServiceRunner(RemoteRunner):
    """The ``run(notebook, plan) -> Outcome`` of a Sandbox, by a warm sandbox service.

    ``hide``: the batch's folders, which the service's sandbox must hide; ``limits``: the
    command's, which must be the service's.  Either differing is a SandboxError that says
    how to start the service, before anything runs."""

    def __init__(self, path: Path, *, hide=(), limits: Limits = Limits(), preload=()):  # noqa: B008
        self.path = Path(path)
        info = self._ask({"op": "hello"})
        if info.get("protocol") != PROTOCOL:
            raise SandboxError(f"{self.path}: a sandbox service of another ScaleGrade version")
        hidden = [str(p) for p in info.get("hidden", [])]
        for folder in (os.path.abspath(p) for p in hide):
            if not any(_within(folder, h) for h in hidden):
                raise SandboxError(
                    f"the sandbox service at {self.path} does not hide {folder} from the "
                    f"notebooks: start it with --hide {folder} (or a folder above it)"
                )
        theirs, mine = info.get("limits") or {}, dataclasses.asdict(limits)
        differ = [f"{k} {theirs.get(k)!r} (this command: {v!r})" for k, v in mine.items()
                  if theirs.get(k) != v]  # fmt: skip
        if differ:
            raise SandboxError(
                f"the sandbox service at {self.path} runs with other limits: "
                f"{'; '.join(differ)}; start it with this command's --timeout and --gpus"
            )
        self.isolation = str(info.get("isolation"))
        self.threads = int(info.get("jobs") or 1)
        self.warm(preload)

    def _connect(self) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.path))
        except OSError as err:
            conn.close()
            raise SandboxError(
                f"no sandbox service at {self.path} ({err.strerror or err}): "
                f"start one with `scalegrade sandbox-serve {self.path}`"
            ) from None
        return conn

    def _ask(self, header: dict, payload: bytes = b"") -> dict:
        with self._connect() as conn:
            return self._exchange(conn, header, payload)[0]

    def _exchange(self, conn, header: dict, payload: bytes = b"") -> tuple[dict, bytes]:
        try:
            wire.send(conn.fileno(), header, payload)
            msg, body = wire.recv(conn.fileno())
        except wire.WireError as err:
            raise SandboxError(f"the sandbox service at {self.path} broke off: {err}") from None
        if msg.get("op") == "refused":
            raise SandboxError(f"the sandbox service at {self.path} refused: {msg.get('why')}")
        return msg, body

    def warm(self, modules) -> None:
        modules = list(modules)
        if modules:
            self._ask({"op": "warm", "modules": modules})

    def _send(self, notebook: Path, data: bytes, plan: Plan) -> Outcome:
        head = plan_to_json(plan)
        header = {"op": "run", "name": notebook.name, "plan_bytes": len(head)}
        with self._connect() as conn:
            _msg, body = self._exchange(conn, header, head + data)
        return Outcome(**json.loads(body))

    def close(self) -> None:
        """Nothing to close: the service stays warm for the next command."""


def _within(path: str, folder: str) -> bool:
    folder = os.path.abspath(folder)
    return folder == "/" or path == folder or path.startswith(folder.rstrip("/") + "/")
