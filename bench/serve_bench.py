"""The platform's speed: the real `scalegrade serve` on loopback, against `scalegrade grade`.

tdlsm/hw1 is released with solutions to N students (the solution notebooks are the
submissions); `scalegrade serve --workers W` runs as a process of its own with the upload
rate limit lifted (``SCALEGRADE_SERVE_UPLOADS_PER_MINUTE``), and clients sign in over HTTP
as a browser does.  Before anything is timed the W first students upload at once and are
graded, so that every worker's sandbox has graded once (a server is warm when a student
uploads; the baselines are cold, as a user runs the CLI).

(1) Upload to verdict: one student uploads, then polls ``/a/tdlsm-hw1/status`` every
    20 ms until the fragment stops polling (no ``hx-get``: graded); R sequential rounds,
    two different notebooks alternating (every upload is graded: checked in the
    gradebook).  p50 (target <= 1.5 s) and p95, and the ratio of p50 to the baseline: the
    wall time of a cold `scalegrade grade tdlsm/hw1 SUBS --keys K --out O` of ONE notebook,
    a process of its own, in the same run.
(2) A burst: the N students upload at once (8 client threads, sessions signed in before),
    one notebook each; submissions per second from the first upload to the last verdict
    (the jobs table's ``finished_at``), against `scalegrade grade` of the same N notebooks
    (``--jobs W``, a fresh ``--out``, a process of its own) in the same run: target >= 90 %
    of its rate.  Both grade with W sandboxes (the server's W worker processes are counted).
(3) Pages while the burst drains: one client GETs a student's ``/a/tdlsm-hw1`` and ``/a``
    (and ``/course`` as the instructor, where the platform has that page) every 100 ms;
    p50, p95 and max per page (target p95 < 300 ms).

A bench reports, it does not gate: it exits 0 whatever the numbers, and 1 when something
fails (a verdict that never comes, a refused upload, a page that errs), with the server's
log.  The CLI baselines run before the server starts, so neither competes with the other.

    .venv/bin/python bench/serve_bench.py [--students 300] [--rounds 20] [--workers 2]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, text  # noqa: E402

from autograder.semester.gradebook import Gradebook  # noqa: E402
from generator import bank  # noqa: E402
from generator.release import release  # noqa: E402
from generator.roster import parse  # noqa: E402
from scalegrade.server import store  # noqa: E402
from scalegrade.server.config import load  # noqa: E402
from scalegrade.server.security import add_account  # noqa: E402

ASSIGNMENT, SLUG = "tdlsm/hw1", "tdlsm-hw1"
PASSWORD = "serve-bench-password"
INSTRUCTOR = "prof"
CLIENTS = 8  # threads sending the burst
STATUS_POLL = 0.02  # seconds between two looks at the status fragment
PAGE_POLL = 0.1  # seconds between two rounds of page loads during the burst
VERDICT_WAIT = 120.0  # seconds a verdict may take before the bench fails
STALL = 180.0  # seconds the burst may go without a verdict before the bench fails
TARGETS = {"p50": 1.5, "rate": 0.90, "page_p95": 0.300}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class BenchError(RuntimeError):
    """Something failed, not merely ran slow: the bench exits 1."""


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between the closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def release_hw1(course: Path, students: int) -> list[str]:
    """tdlsm/hw1 released with solutions to ``students`` students into COURSE/hw1: their
    ids, in order."""
    width = max(3, len(str(students - 1)))
    ids = [f"s{i:0{width}d}" for i in range(students)]
    roster = parse(
        "student_id,name,email\n" + "".join(f"{s},Student {s},{s}@example.edu\n" for s in ids)
    )
    release(
        bank.load().assignment(ASSIGNMENT),
        roster,
        secret=b"serve-bench-secret-0123456789abcdef",
        out=course / "hw1",
        with_solutions=True,
    )
    return ids


def grade_cli(submissions: Path, keys: Path, out: Path, jobs: int) -> tuple[float, int]:
    """`scalegrade grade` as a user runs it, a process of its own: its wall time and the
    verdicts it wrote."""
    command = [sys.executable, "-m", "scalegrade.cli", "grade", ASSIGNMENT, str(submissions),
               "--keys", str(keys), "--out", str(out), "--jobs", str(jobs)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise BenchError(f"scalegrade grade failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, len(list(out.glob("*/results.json")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`scalegrade serve` as a process of its own, its output in a log file."""

    def __init__(self, course: Path, workers: int, log: Path):
        self.course, self.workers, self.log = course, workers, log
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = os.environ | {"SCALEGRADE_SERVE_UPLOADS_PER_MINUTE": "100000"}
        command = [sys.executable, "-m", "scalegrade.cli", "serve", "--course", str(self.course),
                   "--port", str(self.port), "--workers", str(self.workers)]  # fmt: skip
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"scalegrade serve exited ({self.proc.returncode})")
            try:
                if httpx.get(f"{self.url}/signin", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise BenchError("scalegrade serve did not answer within 90 s")

    def worker_pids(self) -> list[int]:
        """The server's worker processes (each with one sandbox)."""
        found = []
        for pid in Path("/proc").iterdir():
            try:
                cmd = (pid / "cmdline").read_bytes().split(b"\0")
                parent = int((pid / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == self.proc.pid and b"scalegrade.server.worker" in cmd:
                found.append(int(pid.name))
        return found

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    if not found:
        raise BenchError("a page had no form with a CSRF token")
    return found.group(1)


@dataclass
class Session:
    """A signed-in browser: its cookies and its session's CSRF token."""

    login: str
    cookies: httpx.Cookies
    csrf: str

    def client(self, url: str) -> httpx.Client:
        return httpx.Client(base_url=url, cookies=self.cookies, timeout=60)


def sign_in(url: str, login: str, page: str) -> Session:
    """Sign in as ``login`` as the sign-in form does; the CSRF token from ``page``."""
    with httpx.Client(base_url=url, timeout=60) as c:
        token = csrf_of(c.get("/signin").text)
        r = c.post("/signin", data={"login": login, "password": PASSWORD, "csrf": token})
        if r.status_code != 303:
            raise BenchError(f"signing in as {login}: {r.status_code}")
        r = c.get(page)
        if r.status_code != 200:
            raise BenchError(f"{login}: GET {page}: {r.status_code}")
        return Session(login, httpx.Cookies(c.cookies), csrf_of(r.text))


def upload(c: httpx.Client, session: Session, notebook: bytes) -> None:
    r = c.post(f"/a/{SLUG}/submit", data={"csrf": session.csrf},
               files={"notebook": ("hw1.ipynb", notebook)})  # fmt: skip
    if r.status_code != 303:
        body = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.text))[:400]
        raise BenchError(f"{session.login}'s upload was refused ({r.status_code}): {body}")


def parallel(items: list, work, threads: int = CLIENTS) -> list:
    """``work`` on every item by ``threads`` threads; the results in order; the first
    error raised."""
    results: list = [None] * len(items)
    errors: list[BaseException] = []
    todo: queue.Queue = queue.Queue()
    for i, item in enumerate(items):
        todo.put((i, item))

    def run() -> None:
        while not errors:
            try:
                i, item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[i] = work(item)
            except BaseException as err:  # noqa: BLE001 (re-raised below)
                errors.append(err)

    pool = [threading.Thread(target=run) for _ in range(min(threads, len(items)))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return results


class Jobs:
    """The platform's jobs table, read as the bench's own observer."""

    def __init__(self, db_url: str):
        self.engine = create_engine(db_url)

    def rows(self, sql: str, **params) -> list[tuple]:
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]

    def last_id(self) -> int:
        return self.rows("SELECT coalesce(max(id), 0) FROM jobs")[0][0]

    def states(self, after: int) -> dict[str, int]:
        rows = self.rows("SELECT state, count(*) FROM jobs WHERE id > :a GROUP BY state", a=after)
        return dict(rows)

    def wait_drained(self, after: int, expected: int) -> None:
        """Until the ``expected`` jobs after ``after`` are all done; a failed one, or no
        verdict for ``STALL`` seconds, fails the bench."""
        done, moved = -1, time.monotonic()
        while True:
            states = self.states(after)
            if set(states) - {"queued", "running", "done"}:
                raise BenchError(f"jobs not graded: {states}")
            if states.get("done", 0) != done:
                done, moved = states.get("done", 0), time.monotonic()
            if done >= expected:
                return
            if time.monotonic() - moved > STALL:
                raise BenchError(f"no verdict for {STALL:.0f} s; jobs: {states}")
            time.sleep(0.1)

    def graded(self, after: int) -> list[tuple]:
        """The jobs after ``after``: (student, submitted_at, finished_at, attempt, error)."""
        return self.rows(
            "SELECT j.student_id, j.submitted_at, j.finished_at, j.attempt_id, a.error "
            "FROM jobs j LEFT JOIN attempts a ON a.id = j.attempt_id WHERE j.id > :a "
            "ORDER BY j.id",
            a=after,
        )

    def workers(self, after: int) -> set[str]:
        return {w for (w,) in self.rows("SELECT worker FROM jobs WHERE id > :a", a=after)}


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def check_graded(jobs: Jobs, after: int, expected: int) -> list[tuple]:
    """Every upload after ``after`` graded once, into an attempt of its own, without error."""
    rows = jobs.graded(after)
    attempts = {r[3] for r in rows if r[3] is not None}
    if len(rows) != expected or len(attempts) != expected:
        raise BenchError(f"{expected} uploads, {len(rows)} jobs, {len(attempts)} attempts")
    errors = [(r[0], r[4]) for r in rows if r[4]]
    if errors:
        raise BenchError(f"graded with an error: {errors[:3]}")
    return rows


def warm_up(url: str, jobs: Jobs, sessions: list[Session], notebooks: dict[str, bytes]) -> None:
    """Each of these students uploads at once, and waits for the verdicts: every worker's
    sandbox grades once before anything is timed."""
    after = jobs.last_id()

    def send(session: Session) -> None:
        with session.client(url) as c:
            upload(c, session, notebooks[session.login])

    parallel(sessions, send)
    jobs.wait_drained(after, len(sessions))
    check_graded(jobs, after, len(sessions))


def rounds(url: str, jobs: Jobs, session: Session, versions: list[bytes], count: int) -> dict:
    """``count`` uploads by one student, one after the other, each timed from the upload to
    the status fragment that no longer polls."""
    after = jobs.last_id()
    waits = []
    with session.client(url) as c:
        for i in range(count):
            start = time.perf_counter()
            upload(c, session, versions[i % len(versions)])
            while True:
                r = c.get(f"/a/{SLUG}/status")
                if r.status_code != 200:
                    raise BenchError(f"GET /a/{SLUG}/status: {r.status_code}")
                if "hx-get" not in r.text:
                    break
                if time.perf_counter() - start > VERDICT_WAIT:
                    raise BenchError(f"round {i + 1}: no verdict after {VERDICT_WAIT:.0f} s")
                time.sleep(STATUS_POLL)
            waits.append(time.perf_counter() - start)
            if "points" not in r.text:
                raise BenchError(f"round {i + 1}: the fragment shows no score:\n{r.text}")
    rows = check_graded(jobs, after, count)
    server = [_epoch(done) - _epoch(submitted) for _, submitted, done, _, _ in rows]
    return {"waits": waits, "server": server}


@dataclass
class Watch:
    """Page loads every ``PAGE_POLL`` seconds until stopped: their latencies per page."""

    url: str
    pages: list[tuple[Session, str]]
    latencies: dict[str, list[float]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        clients = {s.login: s.client(self.url) for s, _ in self.pages}
        try:
            while not self.stop.is_set():
                tick = time.perf_counter()
                for session, path in self.pages:
                    start = time.perf_counter()
                    r = clients[session.login].get(path)
                    took = time.perf_counter() - start
                    if r.status_code != 200:
                        raise BenchError(f"{session.login}: GET {path}: {r.status_code}")
                    self.latencies.setdefault(path, []).append(took)
                self.stop.wait(max(0.0, PAGE_POLL - (time.perf_counter() - tick)))
        except BaseException as err:  # noqa: BLE001 (reported by the main thread)
            self.error = err
        finally:
            for c in clients.values():
                c.close()


def burst(url: str, jobs: Jobs, sessions: list[Session], notebooks: dict, watch: Watch) -> dict:
    """Every student uploads once, from ``CLIENTS`` threads at once, while ``watch`` loads
    pages; the rate from the first upload to the last verdict."""
    after = jobs.last_id()
    watcher = threading.Thread(target=watch.run, daemon=True)
    watcher.start()
    first = time.time()

    def send(session: Session) -> None:
        with session.client(url) as c:
            upload(c, session, notebooks[session.login])

    try:
        parallel(sessions, send)
        sent = time.time() - first
        jobs.wait_drained(after, len(sessions))
    finally:
        watch.stop.set()
        watcher.join()
    if watch.error is not None:
        raise watch.error
    rows = check_graded(jobs, after, len(sessions))
    last = max(_epoch(done) for _, _, done, _, _ in rows)
    return {"seconds": last - first, "sent": sent, "workers": jobs.workers(after)}


def accounts(db_url: str, students: list[str]) -> None:
    """The students' accounts and an instructor's, made before the server starts."""
    book = Gradebook(db_url)
    try:
        store.migrate(book.engine)
        for student in students:
            add_account(book.engine, student, "student", password=PASSWORD)
        add_account(book.engine, INSTRUCTOR, "instructor", name="Prof", password=PASSWORD)
    finally:
        book.close()


def instructor_pages(url: str) -> tuple[Session | None, str]:
    """The instructor's signed-in session if the platform has a ``/course`` page."""
    session = sign_in(url, INSTRUCTOR, "/signin")  # a page of every role with the token
    with session.client(url) as c:
        status = c.get("/course").status_code
    if status != 200:
        return None, f"/course answers {status}: not timed"
    return session, "/course timed as the instructor"


def second_version(notebook: bytes) -> bytes:
    """The same answers saved again with a note: another file, the same grade."""
    doc = json.loads(notebook)
    doc["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "Saved again."})
    return json.dumps(doc, indent=1).encode()


def run(folder: Path, args) -> dict:
    course = folder / "course"
    students = release_hw1(course, args.students)
    solutions, keys = course / "hw1" / "solutions", course / "hw1" / "keys"
    notebooks = {s: (solutions / s / "hw1.ipynb").read_bytes() for s in students}
    one = folder / "subs-1"
    shutil.copytree(solutions / students[0], one / students[0])
    cli_one, n_one = grade_cli(one, keys, folder / "cli-one", args.workers)
    cli_all, n_all = grade_cli(solutions, keys, folder / "cli-all", args.workers)
    if (n_one, n_all) != (1, len(students)):
        raise BenchError(f"scalegrade grade wrote {n_one} and {n_all} verdicts")

    config = load(course)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    accounts(config.db_url, students)
    server = Server(course, args.workers, folder / "serve.log")
    jobs = Jobs(config.db_url)
    out: dict = {"cli_one": cli_one, "cli_all": cli_all, "students": len(students)}
    try:
        server.start()
        out["worker_pids"] = len(server.worker_pids())
        page = f"/a/{SLUG}"
        sessions = parallel(students, lambda s: sign_in(server.url, s, page))
        warm_up(server.url, jobs, sessions[: args.workers], notebooks)
        first = notebooks[students[0]]
        out["rounds"] = rounds(server.url, jobs, sessions[0], [first, second_version(first)],
                               args.rounds)  # fmt: skip
        watched = sessions[-1]
        prof, out["course_page"] = instructor_pages(server.url)
        pages = [(watched, page), (watched, "/a")] + ([(prof, "/course")] if prof else [])
        watch = Watch(server.url, pages)
        out["burst"] = burst(server.url, jobs, sessions, notebooks, watch)
        out["pages"] = watch.latencies
    except BaseException:
        server.stop()
        _tail(folder / "serve.log", config.data_dir / "logs")
        raise
    server.stop()
    jobs.engine.dispose()
    return out


def _tail(log: Path, workers: Path) -> None:
    for path in [log, *sorted(workers.glob("*.log"))]:
        if path.is_file():
            lines = path.read_text(errors="replace").splitlines()[-30:]
            print(f"--- the last lines of {path}:", *lines, sep="\n", file=sys.stderr)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(out: dict, args) -> None:
    waits, server = out["rounds"]["waits"], out["rounds"]["server"]
    p50, p95 = percentile(waits, 50), percentile(waits, 95)
    b = out["burst"]
    n = out["students"]
    serve_rate, cli_rate = n / b["seconds"], n / out["cli_all"]
    rows = [
        (f"(1) upload to verdict, p50 of {len(waits)}", f"{p50:.2f} s",
         f"<= {TARGETS['p50']} s", verdict(p50 <= TARGETS["p50"])),
        ("    p95", f"{p95:.2f} s", "", ""),
        ("    cold `scalegrade grade`, one notebook", f"{out['cli_one']:.2f} s", "", ""),
        ("    p50 / cold CLI", f"{p50 / out['cli_one']:.2f}", "", ""),
        ("    of which the server's (upload to record), p50",
         f"{percentile(server, 50):.2f} s", "", ""),
        (f"(2) burst of {n}, `serve`", f"{serve_rate:.2f} /s", "", ""),
        (f"    `scalegrade grade --jobs {args.workers}`", f"{cli_rate:.2f} /s", "", ""),
        ("    serve / grade", f"{serve_rate / cli_rate:.0%}", f">= {TARGETS['rate']:.0%}",
         verdict(serve_rate / cli_rate >= TARGETS["rate"])),
    ]  # fmt: skip
    for path, values in out["pages"].items():
        p95 = percentile(values, 95)
        rows.append((f"(3) GET {path} during the burst, p95 of {len(values)}",
                     f"{p95 * 1e3:.0f} ms", f"< {TARGETS['page_p95'] * 1e3:.0f} ms",
                     verdict(p95 < TARGETS["page_p95"])))  # fmt: skip
        rows.append(("    p50 / max", f"{percentile(values, 50) * 1e3:.0f} / "
                     f"{max(values) * 1e3:.0f} ms", "", ""))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    print(
        f"sandboxes: serve --workers {args.workers} ({out['worker_pids']} worker processes; "
        f"{len(b['workers'])} graded the burst), grade --jobs {args.workers}; the burst's "
        f"uploads were all in after {b['sent']:.1f} s of {b['seconds']:.1f} s; "
        f"{out['course_page']}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="Keep the course and the server's data here.")
    args = parser.parse_args()
    if args.students < args.workers or args.rounds < 1 or args.workers < 1:
        parser.error("--students >= --workers >= 1 and --rounds >= 1")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="scalegrade-serve-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        out = run(folder.resolve(), args)
    except BenchError as err:
        print(f"serve_bench: {err}", file=sys.stderr)
        sys.exit(1)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    report(out, args)


if __name__ == "__main__":
    main()
