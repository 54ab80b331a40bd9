"""The probe process, for real: probe() runs beside the student's process, not in it.

The student's process S runs the cells and then only serves its functions; the probe
process P (another uid) holds the probe code, the seeds and the inputs, and reads what
S sends as hostile.  Each test below is a notebook doing what a cheating student would.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autograder.checklib import Record
from autograder.sandbox import Limits, Plan, Probe, Sandbox, namespaces_available
from autograder.sandbox.inside import wire
from tests.autograder.test_sandbox import notebook

ROOT = Path(__file__).resolve().parents[2]

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not namespaces_available(), reason="needs root and namespaces"
)
LIMITS = Limits(wall_seconds=20.0, cpu_seconds=20, memory_bytes=2 << 30)
SECRET_MARK = "PROBE-ONLY-7f3a9c"  # in the probe's code: S must never see it

PROBE = f'''
ISOLATED = True
MARK = "{SECRET_MARK}"
import numpy as np


class Counter:
    def __init__(self):
        self.calls = []

    def tick(self, x):
        self.calls.append(x)
        return x + 1


def probe(student, seed, params):
    x = np.random.default_rng(seed).integers(0, 100, size=5)
    counter = Counter()
    try:
        y = student(x, counter)
    except Exception as err:
        return {{"error": f"{{type(err).__name__}}: {{err}}"}}
    return {{"x": x.tolist(), "y": np.asarray(y).tolist(), "ticks": counter.calls}}
'''
SEED = 6_385_021_779  # not a number numpy's docstrings hold (987654321 is one)


def plan(function: str = "double", source: str = PROBE) -> Plan:
    return Plan(
        variables=("q1_found",),
        probes=(Probe("q2-double", function, source, SEED, {"n": 5}, isolated=True),),
    )


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(limits=LIMITS) as box:
        yield box


def _run(sandbox, tmp_path, *cells: str, the_plan: Plan | None = None):
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", *cells), the_plan or plan())
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    return outcome.harvest


HONEST = """
def double(x, counter):
    for v in x:
        counter.tick(int(v))
    return 2 * x
q1_found = "nothing"
"""


def test_the_probe_calls_the_function_in_the_students_process(sandbox, tmp_path):
    harvest = _run(sandbox, tmp_path, HONEST)
    probe = harvest["probes"]["q2-double"]
    x = np.random.default_rng(SEED).integers(0, 100, size=5).tolist()
    assert probe == {"ok": True, "result": {"x": x, "y": [2 * v for v in x], "ticks": x}}
    assert harvest["answers"]["q1_found"] == {"kind": "string", "value": "nothing"}


@needs_root
def test_the_students_process_holds_no_probe_code_or_seed(sandbox, tmp_path):
    # everything S can reach of itself: its objects, its memory, its frames, its fds
    # the needles are split, so that the search itself never holds them whole
    mark = (SECRET_MARK[:6], SECRET_MARK[6:])
    seed = (str(SEED)[:4], str(SEED)[4:])
    search = f"""
import ctypes, gc, os
MARKS = [{mark!r}, {seed!r}]
def holds(text):
    for head, tail in MARKS:
        i = text.find(head)
        while i >= 0:
            if text[i + len(head) : i + len(head) + len(tail)] == tail:
                return True
            i = text.find(head, i + 1)
    return False
found = []
for obj in gc.get_objects():
    try:
        text = repr(obj)
    except Exception:
        continue
    if holds(text):
        found.append(type(obj).__name__)
with open("/proc/self/maps") as maps:  # every readable mapping, read in place
    regions = [line.split() for line in maps]
for fields in regions:
    if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
        continue
    lo, hi = (int(x, 16) for x in fields[0].split("-"))
    if hi - lo <= 1 << 30 and holds(ctypes.string_at(lo, hi - lo).decode("latin-1")):
        found.append("memory " + fields[0])
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        continue
    if "probes" in target:
        found.append("fd " + target)
"""
    harvest = _run(sandbox, tmp_path, HONEST, search + "q1_found = repr(found)")
    assert harvest["answers"]["q1_found"] == {"kind": "string", "value": "[]"}
    assert harvest["probes"]["q2-double"]["ok"]


@needs_root
def test_the_probe_process_is_out_of_the_students_reach(sandbox, tmp_path):
    # S finds P in /proc but may not read its memory, signal it or trace it
    reach = """
import ctypes, os, signal
me = os.getpid()
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
tried = []
for pid in others:
    for what, act in (
        ("mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1)),
        ("environ", lambda: open(f"/proc/{pid}/environ", "rb").read(1)),
        ("kill", lambda: os.kill(pid, signal.SIGSTOP)),
    ):
        try:
            act()
            tried.append(f"{what} ok")
        except OSError as err:
            tried.append(f"{what} {type(err).__name__}")
    libc = ctypes.CDLL(None, use_errno=True)
    tried.append("ptrace " + str(libc.ptrace(16, pid, 0, 0)))  # PTRACE_ATTACH
q1_found = ";".join(tried)
"""
    harvest = _run(sandbox, tmp_path, HONEST, reach)
    tried = harvest["answers"]["q1_found"]["value"].split(";")
    assert tried and "ok" not in " ".join(tried), tried
    assert all(t == "ptrace -1" or "Error" in t for t in tried), tried
    assert harvest["probes"]["q2-double"]["ok"]  # and the probe was not stopped


FORGERIES = {
    # rewrite the caller's frames, patch numpy: there is nothing of the probe's to reach
    "frames": """
import sys
def double(x, counter):
    frame = sys._getframe()
    while frame is not None:
        for name in list(frame.f_locals):
            if name in ("counter", "result", "y"):
                frame.f_locals[name] = "forged"
        frame = frame.f_back
    counter.tick(999)
    return 2 * x
""",
    "numpy": """
import numpy as np
np.random.default_rng = lambda *a, **k: None
np.asarray = lambda *a, **k: [0]
def double(x, counter):
    counter.tick(int(x[0]))
    return 2 * x
""",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forging_in_the_students_process_changes_nothing_the_probe_measures(
    sandbox, tmp_path, name
):
    probe = _run(sandbox, tmp_path, FORGERIES[name] + "q1_found = 'x'")["probes"]["q2-double"]
    x = np.random.default_rng(SEED).integers(0, 100, size=5).tolist()
    assert probe["ok"] and probe["result"]["x"] == x and probe["result"]["y"] == [2 * v for v in x]
    assert probe["result"]["ticks"] == ([999] if name == "frames" else x[:1])  # what S did


def test_a_function_that_hangs_or_exits_costs_its_probe_not_the_harvest(tmp_path):
    hangs = "def double(x, counter):\n    while True:\n        pass\nq1_found = 'kept'"
    exits = (  # past the notebook's exit guard: the C library's _exit
        "import ctypes\ndef double(x, counter):\n    ctypes.CDLL(None)._exit(3)\nq1_found = 'kept'"
    )
    with Sandbox(limits=Limits(wall_seconds=6.0, cpu_seconds=6)) as box:
        for cells, why in ((exits, "ended during the call"), (hangs, "did not answer")):
            outcome = box.run(notebook(tmp_path / "nb.ipynb", cells), plan())
            assert outcome.error is None, (outcome.error, outcome.log[-1500:])
            assert outcome.harvest["answers"]["q1_found"]["value"] == "kept"
            result = outcome.harvest["probes"]["q2-double"]
            assert not result["ok"] and why in result["error"], result  # the probe, not the job
            assert outcome.seconds < 6.0


def test_a_missing_function_is_named(sandbox, tmp_path):
    harvest = _run(sandbox, tmp_path, "q1_found = 'no function'")
    assert harvest["probes"]["q2-double"] == {
        "ok": False,
        "error": "function double is not defined",
    }


LIBRARY_PROBE = """
ISOLATED = True
import numpy as np
from autograder.checklib import Record  # served to the probe process, nothing else is


def probe(student, seed, params):
    try:
        import autograder.grading.keys
        other = "imported"
    except ImportError as err:
        other = type(err).__name__
    x = np.arange(3)
    return {
        "one": student.call(x, None),
        "many": student.calls([(x, None), (None, None)]),
        "other": other,
    }
"""


def test_the_probe_process_serves_the_authors_library_and_records_cross_as_data(sandbox, tmp_path):
    """``from autograder.checklib import ...`` works in P, where the rest of the project is
    hidden; a Record in the probe's result reaches the grader as plain data."""
    cells = "def double(x, counter):\n    return 2 * x\nq1_found = 1"
    harvest = _run(sandbox, tmp_path, cells, the_plan=plan(source=LIBRARY_PROBE))
    probe = harvest["probes"]["q2-double"]
    assert probe["ok"], probe
    result = probe["result"]
    assert result["other"] == "ModuleNotFoundError"
    one = Record.read(result["one"])
    assert one.ok and one.array().tolist() == [0.0, 2.0, 4.0] and one.seconds > 0
    good, bad = (Record.read(d) for d in result["many"])
    assert good.array().tolist() == [0.0, 2.0, 4.0]
    assert bad.raised == "TypeError" and "NoneType" in bad.error


def test_checks_that_do_not_compile_are_that_probes_error(sandbox, tmp_path):
    broken = PROBE.replace("def probe(student, seed, params):", "def probe(student, seed:")
    harvest = _run(sandbox, tmp_path, HONEST, "q1_found = 1", the_plan=plan(source=broken))
    result = harvest["probes"]["q2-double"]
    assert not result["ok"] and result["error"].startswith("SyntaxError"), result


def test_the_grader_compiles_the_checks_once_and_the_probe_process_runs_that_code():
    """prober.compiled, in the grader (sandbox._compiled: once per source and probe); in
    P, prober._code runs that code object where it is this interpreter's bytecode for this
    very probe, and compiles the source otherwise."""
    from autograder.sandbox.box import _compiled
    from autograder.sandbox.inside import prober

    source = "def probe(student, seed, params):\n    return 'source'\n"
    graders = "def probe(student, seed, params):\n    return 'compiled'\n"

    def runs(request: dict) -> str:
        ns: dict = {}
        exec(prober._code(request, prober.checks_filename("q1-f")), ns)  # noqa: S102
        return ns["probe"](None, 0, {})

    request = {"id": "q1-f", "source": source}
    assert runs(request) == "source"  # nothing compiled: P compiles
    assert runs(request | prober.compiled(graders, "q1-f")) == "compiled"  # not compiled again
    assert runs(request | prober.compiled(graders, "q1-f") | {"magic": "0d0d0a00"}) == "source"
    assert runs(request | prober.compiled(graders, "q7-other")) == "source"  # another probe's
    for blob in ("not base64 at all", base64.b64encode(b"\x00garbage").decode()):
        assert runs(request | {"code": blob, "magic": prober._MAGIC}) == "source"
    assert prober.compiled("def probe(:\n", "q1-f") == {}  # P reports the SyntaxError
    assert _compiled(source, "q1-f") is _compiled(source, "q1-f")


# --- the wire: what P accepts from S ----------------------------------------------------


def _node(value):
    enc = wire.Encoder()
    return enc.value(value), enc.payload


def test_values_cross_as_tagged_data_and_arrays_as_bytes():
    value = {"a": [1, 2.5, None, True, "s", (3, 4)], "x": np.arange(6, dtype=np.float32)}
    node, payload = _node(value)
    back = wire.decode(node, payload)
    assert back["a"] == [1, 2.5, None, True, "s", (3, 4)]
    assert back["x"].dtype == np.float32 and back["x"].tolist() == list(range(6))
    assert wire.decode(*_node(float("nan"))) != wire.decode(*_node(float("nan")))  # nan
    big = -(3**200)  # beyond int64: exact (the calculator's products need every digit)
    assert wire.decode(*_node(big)) == big and type(wire.decode(*_node(big))) is int
    with pytest.raises(wire.WireError, match="bits"):
        wire.Encoder().value(1 << (wire.MAX_INT_BITS + 1))


@pytest.mark.parametrize(
    "node",
    [
        {"x": 1},  # an object that is no tag
        {"$tuple": [1], "extra": 2},
        {"$f": "huge"},
        {"$int": "12"},  # hex only: no quadratic decimal conversion
        {"$int": "0x" + "f" * (wire.MAX_INT_BITS // 4 + 8)},
        {
            "$array": [0, 80],
            "dtype": "<f8",
            "shape": [10],
            "torch": False,
            "grad": False,
        },  # no bytes
        {"$array": [0, 8], "dtype": "|O", "shape": [1], "torch": False, "grad": False},  # objects
        {"$callback": 0},  # S may not hand P a handle
        {"$object": 0, "methods": ["f"], "attrs": {}},
    ],
)
def test_the_probe_side_refuses_what_the_protocol_does_not_allow(node):
    with pytest.raises(wire.WireError):
        wire.decode(node, b"")


def test_deep_nesting_and_unknown_objects_are_refused():
    deep = 1
    for _ in range(wire.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(wire.WireError, match="nested"):
        wire.decode(deep, b"")
    with pytest.raises(wire.WireError, match="plain data"):
        wire.Encoder().value(object())
    assert json.loads(json.dumps(_node([1, 2])[0]))  # the header is JSON


# The ranks below are forked from S (fresh=False): their rounds, their pool, their hand-over
# through S.  Fresh ranks, started by the job's init: test_fresh_ranks.py.
ROUNDS_PROBE = """
ISOLATED = True


def probe(student, seed, params):
    rounds = [[(r, 0) for r in range(3)], [(r, 1) for r in range(3)]]
    out = student.rounds(rounds, seconds=15, fresh=False)
    return [[o if isinstance(o, list) else f"{type(o).__name__}: {o}" for o in k] for k in out]
"""
ROUNDS_CELL = """
import os
calls = []
def who(rank, round_):
    calls.append(round_)
    if rank == 1 and round_ == 0:
        raise ValueError("not in the first round")
    if rank == 2 and round_ == 0:
        os._exit(3)
    return [os.getpid(), list(calls)]
q1_found = "nothing"
"""


@needs_root
def test_rounds_call_each_rank_again_in_the_same_process(sandbox, tmp_path):
    """Student.rounds: one fork per rank for several calls, made in order; a call that
    raised costs that round only, a process that ended every round left."""
    the_plan = Plan(("q1_found",), (Probe("q3-who", "who", ROUNDS_PROBE, SEED, {}, True),))
    harvest = _run(sandbox, tmp_path, ROUNDS_CELL, the_plan=the_plan)
    first, second = harvest["probes"]["q3-who"]["result"]
    assert first[0][1] == [0] and second[0] == [first[0][0], [0, 1]]  # one process, in order
    assert first[1] == "ValueError: not in the first round"
    assert second[1][1] == [0, 1]  # the same process goes on after raising
    assert first[2].startswith("RuntimeError: rank 2's process ended") and second[2] == first[2]
    assert first[0][0] != os.getpid() and len({first[0][0], second[1][0]}) == 2


SMALLER_ROUNDS_PROBE = """
ISOLATED = True


def probe(student, seed, params):
    rounds = [[(r, 0) for r in range(3)], [(0, 1)], [(r, 2) for r in range(2)]]
    out = student.rounds(rounds, seconds=15, fresh=False)
    return [[o if isinstance(o, list) else f"{type(o).__name__}: {o}" for o in k] for k in out]
"""


@needs_root
def test_a_smaller_round_is_made_by_the_first_ranks_and_skipped_by_the_others(sandbox, tmp_path):
    """Rounds of 3, 1 and 2 calls on 3 processes (the tensor-parallel check's t = 2, 4, 8 on
    8): rank r makes the calls of the rounds it is in, in order, in its own process."""
    plan = Plan(("q1_found",), (Probe("q3-who", "who", SMALLER_ROUNDS_PROBE, SEED, {}, True),))
    cell = ROUNDS_CELL.replace("rank == 1 and round_ == 0", "rank == 1 and round_ == 2")
    cell = cell.replace("not in the first round", "not in the third round")
    harvest = _run(sandbox, tmp_path, cell, the_plan=plan)
    first, second, third = harvest["probes"]["q3-who"]["result"]
    assert [len(first), len(second), len(third)] == [3, 1, 2]
    assert second[0] == [first[0][0], [0, 1]] and third[0] == [first[0][0], [0, 1, 2]]
    assert first[1][1] == [0] and third[1] == "ValueError: not in the third round"
    assert first[2].startswith("RuntimeError: rank 2's process ended")  # in no later round
    assert len({first[0][0], first[1][0]}) == 2


POOL_PROBE = """
ISOLATED = True


def probe(student, seed, params):
    out = []
    if "seed" in params:
        student.seed(params["seed"])
    for world, gloo in params["runs"]:
        calls = [(r, student.gloo_ring() if gloo else None) for r in range(world)]
        got = student.ranks(calls, seconds=30, gloo=gloo, fresh=False)
        out.append([f"{type(o).__name__}: {o}" if isinstance(o, Exception) else o for o in got])
    return out
"""
POOL_CELL = """
import os
def pid(rank, comm):
    return os.getpid()
q1_found = "nothing"
"""
SEEDED_CELL = """
import os
import numpy as np
def pid(rank, comm):
    return [os.getpid(), float(np.random.random())]
q1_found = "nothing"
"""
ENDS_ONCE_CELL = """
import os
def pid(rank, comm):
    if rank == 1 and not os.path.exists("ended"):  # the first run's rank 1 only
        open("ended", "w").close()
        os._exit(3)
    return os.getpid()
q1_found = "nothing"
"""


def _pool_plan(*runs: tuple[str, dict]) -> Plan:
    return Plan(("q1_found",), tuple(Probe(i, "pid", POOL_PROBE, SEED, p, True) for i, p in runs))


@needs_root
def test_later_checks_run_on_the_ranks_kept_and_fork_only_those_they_lack(sandbox, tmp_path):
    """One set of rank processes serves the checks of a submission in turn (the ring's
    simulated run, then the tensor-parallel check's 8): a check takes the first ranks kept
    and forks the rest.  A check never gets a rank that served it already, and a gloo run
    gets a group of its own."""
    the_plan = _pool_plan(
        ("q3-ring", {"runs": [(3, False), (2, True)]}),  # like the ring: simulated, then gloo
        ("q4-tp", {"runs": [(5, False)]}),
        ("q5-twice", {"runs": [(2, False), (2, False)]}),
        ("q6-gloo", {"runs": [(2, True)]}),
        ("q7-after", {"runs": [(2, False)]}),
    )
    got = _run(sandbox, tmp_path, POOL_CELL, the_plan=the_plan)["probes"]
    assert all(got[i]["ok"] for i in got), got
    (ring, ring_gloo), (tp,) = got["q3-ring"]["result"], got["q4-tp"]["result"]
    first, second = got["q5-twice"]["result"]
    (gloo,), (after,) = got["q6-gloo"]["result"], got["q7-after"]["result"]
    assert len(set(tp)) == 5 and tp[:3] == ring  # 3 kept (past the ring's gloo run), 2 forked
    assert not set(ring_gloo) & set(ring + tp)
    assert first == tp[:2]  # another check: the ranks kept
    assert not set(second) & set(tp)  # the same check again: processes new to it
    assert not set(gloo) & set(tp + second)  # a group of its own
    assert after == second  # the gloo run left the pool as it was
    assert os.getpid() not in tp


@needs_root
def test_ranks_kept_do_not_serve_a_check_that_asked_the_student_first(sandbox, tmp_path):
    """A check that seeds the student's generators before its run gets ranks forked after
    the seed, which see it: kept ranks, forked before, would not."""
    the_plan = _pool_plan(
        ("q3-ring", {"runs": [(2, False)]}), ("q4-seeded", {"runs": [(2, False)], "seed": 7})
    )
    got = _run(sandbox, tmp_path, SEEDED_CELL, the_plan=the_plan)["probes"]
    (ring,), (seeded,) = got["q3-ring"]["result"], got["q4-seeded"]["result"]
    assert not {pid for pid, _ in ring} & {pid for pid, _ in seeded}
    # numpy.random.seed(7) in S (harness._seed_globals), then each rank's first draw
    assert [x for _, x in seeded] == [np.random.RandomState(7).random_sample()] * 2


@needs_root
def test_a_run_whose_rank_ended_leaves_no_ranks_to_the_next_check(sandbox, tmp_path):
    the_plan = _pool_plan(("q3-ring", {"runs": [(3, False)]}), ("q4-tp", {"runs": [(3, False)]}))
    got = _run(sandbox, tmp_path, ENDS_ONCE_CELL, the_plan=the_plan)["probes"]
    (ring,), (tp,) = got["q3-ring"]["result"], got["q4-tp"]["result"]
    assert ring[1].startswith("RuntimeError: rank 1's process ended")
    assert all(isinstance(p, int) for p in tp) and not {ring[0], ring[2]} & set(tp)


def test_rounds_need_a_call_in_each_and_gloo_every_rank_in_each():
    from autograder.sandbox.inside import prober

    with pytest.raises(ValueError, match="one call per rank of its group"):
        prober.Student(None, "who").rounds([[(0,), (1,)], [(0,)]], gloo=True)
    with pytest.raises(ValueError, match="at least one rank"):
        prober.Student(None, "who").rounds([[(0,)], []])
    with pytest.raises(ValueError, match="at least one rank"):
        prober.Student(None, "who").rounds([])


GLOO_STORE = """
import sys
sys.path.insert(0, {root!r})
from autograder.sandbox.inside import harness, wire
harness.wire = wire
store = harness._gloo_store()
if isinstance(store, str):
    print(store)
else:
    import socket
    with socket.create_connection(store.getsockname(), timeout=1.0):
        print("listening", store.getsockname()[0])
"""


@needs_root
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_gloo_ranks_meet_on_a_socket_that_already_listens_or_on_a_file_store(tmp_path):
    """The ranks' TCPStore is served by rank 0 on a socket S opened and made listen before
    any rank was forked: the other ranks' connections wait in its queue, where a store rank
    0 had yet to open made them retry with a back-off (340-820 ms, in 16 of 40 gloo runs
    here).  A network namespace whose loopback is down cannot connect: a file store there."""
    code = GLOO_STORE.format(root=str(ROOT))
    up = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert up.stdout.split() == ["listening", "127.0.0.1"]
    down = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", code],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert down.stdout.startswith(f"file://{tmp_path}/gloo-"), down.stdout


GLOO_SIZES_PROBE = """
ISOLATED = True


def probe(student, seed, params):
    calls = [(r, 3, student.gloo_ring()) for r in range(3)]
    out = student.ranks(calls, seconds=30, gloo=True)
    return [o if isinstance(o, list) else f"{type(o).__name__}: {o}" for o in out]
"""
GLOO_SIZES_CELL = """
import numpy as np
SIZES = (0, 1, 255, 256, 257, 1000)  # around the one-message frame of 256 values
def echo(rank, world, comm):
    got = []
    for k, size in enumerate(SIZES):
        back = comm.send_recv(np.arange(size, dtype=np.float64) + 1000 * rank + k / 8)
        got.append([len(back), float(back.sum())])
    return got
q1_found = "nothing"
"""


@needs_root
def test_the_gloo_ring_carries_every_message_size_whole(sandbox, tmp_path):
    """_GlooRing.send_recv: a chunk that fits the frame crosses in one message, a longer
    one in two; each rank gets exactly what rank - 1 sent in the same call."""
    the_plan = Plan(("q1_found",), (Probe("q3-echo", "echo", GLOO_SIZES_PROBE, SEED, {}, True),))
    ranks = _run(sandbox, tmp_path, GLOO_SIZES_CELL, the_plan=the_plan)["probes"]["q3-echo"]
    assert ranks["ok"], ranks
    for r, got in enumerate(ranks["result"]):
        src = (r - 1) % 3
        want = [
            [size, float((np.arange(size) + 1000 * src + k / 8).sum())]
            for k, size in enumerate((0, 1, 255, 256, 257, 1000))
        ]
        assert got == want, (r, got)


HANDOVER_PROBE = """
ISOLATED = True


def probe(student, seed, params):
    return [repr(o) for o in student.ranks([(r,) for r in range(3)], seconds=15, fresh=False)]
"""
HANDOVER_CELL = """
import os, sys
def who(rank):
    return rank
for module in list(sys.modules.values()):
    if callable(getattr(module, "send_fds", None)) and hasattr(module, "recv_fds"):
        real = module.send_fds
        def forged(fd, header, fds, _real=real):
            null = os.open("/dev/null", os.O_RDONLY)
            _real(fd, header, {FORGED})
        module.send_fds = forged
q1_found = "nothing"
"""


@needs_root
@pytest.mark.parametrize(
    ("forged", "told"),
    [
        ("[null] * len(fds)", "did not hand over its ranks"),  # not sockets
        ("fds[:-1]", "did not hand over its ranks"),  # one short
        ("fds + [null]", "more than 3 descriptors"),  # one too many
    ],
)
def test_rank_sockets_that_s_forges_end_the_probe_not_the_grader(sandbox, tmp_path, forged, told):
    """S hands P a socket per rank (SCM_RIGHTS); P takes only as many sockets as ranks,
    and only sockets: anything else ends the probe, with the reason."""
    cell = HANDOVER_CELL.replace("{FORGED}", forged)
    the_plan = Plan(("q1_found",), (Probe("q3-who", "who", HANDOVER_PROBE, SEED, {}, True),))
    harvest = _run(sandbox, tmp_path, cell, the_plan=the_plan)
    assert harvest["answers"]["q1_found"]["value"] == "nothing"  # the harvest stands
    probe = harvest["probes"]["q3-who"]
    assert not probe["ok"] and told in probe["error"], probe


@needs_root
def test_ranks_talk_to_the_probe_process_directly(sandbox, tmp_path):
    """Unforged, the same hand-over runs the three ranks, each in a process of its own."""
    cell = HANDOVER_CELL.replace("module.send_fds = forged", "pass")
    the_plan = Plan(("q1_found",), (Probe("q3-who", "who", HANDOVER_PROBE, SEED, {}, True),))
    probe = _run(sandbox, tmp_path, cell, the_plan=the_plan)["probes"]["q3-who"]
    assert probe == {"ok": True, "result": ["0", "1", "2"]}


def test_a_frame_hands_descriptors_over_and_never_more_than_asked():
    """wire.send_fds / recv_fds: the descriptors arrive with their frame, usable; a
    plain frame brings none; more than ``most`` is refused and none is left open."""
    import socket
    import time

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    soon = time.monotonic() + 5
    with mine, theirs:
        r, w = os.pipe()
        wire.send_fds(mine.fileno(), {"op": "ranks", "id": 7}, [w, w])
        header, payload, fds = wire.recv_fds(theirs.fileno(), soon, 2)
        assert (header, payload, len(fds)) == ({"op": "ranks", "id": 7}, b"", 2)
        os.write(fds[1], b"x")
        assert os.read(r, 1) == b"x"  # the copy writes into the same pipe
        for fd in fds:
            os.close(fd)
        wire.send(mine.fileno(), {"op": "raised", "id": 7})
        assert wire.recv_fds(theirs.fileno(), soon, 2) == ({"op": "raised", "id": 7}, b"", [])
        with pytest.raises(wire.Late):
            wire.recv_fds(theirs.fileno(), time.monotonic() + 0.05, 2)
        before = len(os.listdir("/proc/self/fd"))
        wire.send_fds(mine.fileno(), {"op": "ranks", "id": 8}, [w, w, w])
        with pytest.raises(wire.WireError, match="more than 2 descriptors"):
            wire.recv_fds(theirs.fileno(), soon, 2)  # and the channel is given up
        assert len(os.listdir("/proc/self/fd")) == before
        os.close(r)
        os.close(w)
