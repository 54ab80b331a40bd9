"""The marking pages of TAs and instructors: the parts a person grades, one at a time.

``/mark`` counts, per served assignment, the parts a person grades that are still to
mark; ``/mark/<slug>`` lists them; a part's page shows the student's answer (escaped, as
they wrote it), the rubric and the points, and records a score and a comment with
:meth:`~autograder.semester.gradebook.Gradebook.add_marks`, the marker being the
signed-in account.  A mark is checked by :func:`autograder.semester.marks.check`, the
check of ``scalegrade marks import``: a part a person grades, a finite score from 0 to its
points, and the answer the marker read still the one graded (the form carries its
SHA-256), so a student who submitted again since is never marked on an answer nobody
read.  A mark holds while the answer is the same (a regrade keeps it); a new answer is
pending again (the gradebook's rule).

"Next unmarked" follows one stable order: by student id, then the parts in the order of
the assignment, from the part just marked or skipped, round to the start.  The keyboard
shortcuts are in ``static/marking.js`` (no inline script: the CSP), listed on the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route

from autograder.semester import marks
from autograder.semester.gradebook import MarkRow
from contract import times
from scalegrade.server.course import Served
from scalegrade.server.pages.common import page, redirect, require
from scalegrade.server.platform import platform

MARKERS = ("ta", "instructor")
SOURCE = "the marking page"  # a mark's source, as a sheet's is "marks.csv:7"
FORM = marks.Fixes(
    part="choose a part from the marking list",
    answer="(the student submitted again since this page was shown): read their answer as "
    "it is now, below, and mark it again",
    twice="read that mark, below, and save again to replace it",
)


@dataclass(frozen=True)
class Item:
    """One part a person grades, in one student's standing."""

    student: str
    question: str
    index: int  # the question's number in the assignment
    title: str  # the question's
    verdict: dict

    @property
    def part(self) -> str:
        return self.verdict["part"]

    @property
    def where(self) -> tuple[str, str, str]:
        return (self.student, self.question, self.part)

    @property
    def pending(self) -> bool:
        return self.verdict["status"] == "pending"


def items(results: list[dict]) -> list[Item]:
    """Every part a person grades in ``results`` (the gradebook's standings, by student
    id), in the order "next unmarked" follows."""
    return [
        Item(r["student_id"], g["question"], g["index"], g["title"], g["verdict"])
        for r in results
        for g in r["parts"]
        if marks.marked_by_person(g["verdict"])
    ]


def next_pending(found: list[Item], after: tuple[str, str, str] | None) -> Item | None:
    """The first pending part after ``after`` (student, question, part) in the order of
    ``found``, round to the start; never ``after`` itself.  None: all are marked."""
    places = [i.where for i in found]
    start = places.index(after) + 1 if after in places else 0
    return next((i for i in found[start:] + found[:start] if i.pending and i.where != after), None)


def url(served: Served, item: Item) -> str:
    """The page of one part (the question ids hold slashes: they go in the query)."""
    query = urlencode({"question": item.question, "part": item.part})
    return f"/mark/{served.slug}/part/{quote(item.student, safe='')}?{query}"


def _served(request: Request) -> Served:
    served = platform(request).course.by_slug(request.path_params["slug"])
    if served is None:
        raise HTTPException(404, "No such assignment is served.")
    return served


async def overview(request: Request):
    require(request, *MARKERS)
    p = platform(request)
    rows = []
    for served in p.course.assignments.values():
        found = items(p.book.results(served.name))
        pending = sum(i.pending for i in found)
        rows.append((served, pending, len(found) - pending))
    return page(request, "marking/index.html", rows=rows)


async def listing(request: Request):
    require(request, *MARKERS)
    served = _served(request)
    found = items(platform(request).book.results(served.name))
    return page(request, "marking/assignment.html", served=served,
                rows=[(i, url(served, i)) for i in found],
                pending=sum(i.pending for i in found),
                all_marked=request.query_params.get("all") == "marked")  # fmt: skip


async def first_unmarked(request: Request):
    require(request, *MARKERS)
    served = _served(request)
    found = next_pending(items(platform(request).book.results(served.name)), None)
    return redirect(url(served, found) if found else f"/mark/{served.slug}?all=marked")


@dataclass(frozen=True)
class Shown:
    """What one part's page is made of: the part named, every part in the order "next
    unmarked" follows, and the student's standing."""

    served: Served
    where: tuple[str, str, str]  # (student, question, part), as the URL names it
    found: list[Item]  # every part a person grades, of every student
    standing: dict | None  # the student's

    @property
    def item(self) -> Item | None:
        return next((i for i in self.found if i.where == self.where), None)


def _shown(request: Request) -> Shown:
    served = _served(request)
    student = request.path_params["student"]
    q, part = request.query_params.get("question", ""), request.query_params.get("part", "")
    if student not in served.keys:
        raise HTTPException(404, f"No student {student} on the roster of {served.release.title}.")
    results = platform(request).book.results(served.name)  # one query: the order needs all
    standing = next((r for r in results if r["student_id"] == student), None)
    return Shown(served, (student, q, part), items(results), standing)


def _history(request: Request, shown: Shown) -> list[MarkRow]:
    """Every mark given to this part, oldest first."""
    student, q, part = shown.where
    return [
        m
        for m in platform(request).book.marks(shown.served.name, student)
        if (m.question, m.part) == (q, part)
    ]


async def part_page(request: Request):
    require(request, *MARKERS)
    shown = _shown(request)
    if shown.item is None:
        raise HTTPException(404, "This student has no such part graded by a person: choose one "
                            "from the marking list.")  # fmt: skip
    return _render(request, shown)


def _render(request: Request, shown: Shown, problem: str | None = None,
            typed: dict | None = None, status: int = 200):  # fmt: skip
    """The part's page; after a refused mark, with the problem and what was typed."""
    item = shown.item
    v = item.verdict
    key = shown.served.keys.key(item.student)
    history = _history(request, shown)
    if typed is None and v["status"] == "marked":
        typed = {"score": f"{v['score']:g}", "comment": history[-1].comment if history else ""}
    skip = next_pending(shown.found, item.where)
    return page(
        request,
        "marking/part.html",
        status=status,
        served=shown.served,
        item=item,
        v=v,
        rubric=marks.rubrics(key).get((item.question, item.part), ""),
        digest=marks.answer_digest(v["given"].strip()),
        history=[(_at(m.marked_at, shown.served.release.timezone), m) for m in history],
        last_mark=history[-1].id if history else 0,
        typed=typed or {"score": "", "comment": ""},
        problem=problem,
        action=url(shown.served, item),
        skip=url(shown.served, skip) if skip else None,
        pending=sum(i.pending for i in shown.found),
    )


def _at(iso: str, zone: str) -> str:
    return times.shown(datetime.fromisoformat(iso), zone)


def _marked_since(shown: Shown, history: list[MarkRow], last_seen: str) -> dict:
    """``seen`` for :func:`marks.check`: the part, if someone marked it after the page was
    shown (two markers on one part: the second reads the first's mark before replacing
    it)."""
    if not history or str(history[-1].id) == last_seen:
        return {}
    last = history[-1]
    return {
        (shown.served.name, *shown.where): f"{last.marker} marked this part "
        f"({last.score:g} points) after this page was shown"
    }


async def save(request: Request):
    who = require(request, *MARKERS)
    shown = _shown(request)
    form = await request.form()
    typed = {k: str(form.get(k, "")) for k in ("score", "comment")}
    student, q, part = shown.where
    given = marks.Given(shown.served.name, student, q, part, typed["score"], typed["comment"],
                        str(form.get("answer", "")), SOURCE)  # fmt: skip
    standings = {shown.served.name: {student: shown.standing} if shown.standing else {}}
    seen = _marked_since(shown, _history(request, shown), str(form.get("last_mark", "")))
    try:
        if shown.item is not None and not typed["score"].strip():
            raise marks.MarksError("no score given: type one, or Skip to leave the part unmarked")
        mark = marks.check(given, standings, marker=who.login, seen=seen, fixes=FORM)
    except marks.MarksError as err:
        if shown.item is None:
            raise HTTPException(400, f"Not recorded: {err}.") from None
        return _render(request, shown, problem=str(err), typed=typed, status=400)
    platform(request).book.add_marks([mark])
    after = next_pending(shown.found, shown.where)
    return redirect(url(shown.served, after) if after else f"/mark/{shown.served.slug}?all=marked")


ROUTES = [
    Route("/mark", overview),
    Route("/mark/{slug}", listing),
    Route("/mark/{slug}/next", first_unmarked),
    Route("/mark/{slug}/part/{student}", part_page, methods=["GET"]),
    Route("/mark/{slug}/part/{student}", save, methods=["POST"]),
]
