"""Scores back to the LMS (LTI Advantage's Assignment and Grade Services).

Where the student's score goes (the line item and the scopes) is kept per (assignment,
student) in ``lti_links`` (:func:`remember_link`, at each launch); :class:`Poster` posts
each standing's score there once per change, retrying failures with backoff (the latest
standing, or with ``"score": "best"`` the best one it has seen).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiException
from pylti1p3.grade import Grade
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from autograder.semester.gradebook import PartGrade, Submission
from scalegrade.server.config import ServeConfig
from scalegrade.server.lti.adapters import http
from scalegrade.server.lti.config import AGS_CLAIM, HTTP_SECONDS, Tool, tool_of
from scalegrade.server.store import LtiLink, now

log = logging.getLogger(__name__)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
POLL_SECONDS = 5.0  # between two looks at the gradebook for scores to post
FIRST_RETRY_SECONDS = 10.0  # after a failed post; doubled each time, up to
LAST_RETRY_SECONDS = 3600.0


def remember_link(engine: Engine, assignment: str, student: str, body: dict,
                  client_id: str) -> bool:  # fmt: skip
    """Keep where ``student``'s score on ``assignment`` goes (the launch's line item, when
    it grants the score scope); a new line item is posted to afresh."""
    endpoint = body.get(AGS_CLAIM)
    if not isinstance(endpoint, dict):
        return False
    scope, lineitem = endpoint.get("scope") or [], endpoint.get("lineitem")
    if SCORE_SCOPE not in scope or not isinstance(lineitem, str):
        log.info("LTI: %s's launch of %s grants no score passback", student, assignment)
        return False
    where = dict(issuer=str(body["iss"]), client_id=client_id, lti_user=str(body["sub"]),
                 lineitem=lineitem, scope=json.dumps(scope))  # fmt: skip
    with Session(engine) as s, s.begin():
        link = s.scalar(
            select(LtiLink).where(LtiLink.assignment == assignment, LtiLink.student_id == student)
        )
        if link is None:
            s.add(LtiLink(assignment=assignment, student_id=student, launched_at=now(),
                          tries=0, **where))  # fmt: skip
            return True
        if any(getattr(link, k) != v for k, v in where.items()):
            for k, v in where.items():
                setattr(link, k, v)
            link.posted_score = link.posted_max = link.posted_progress = link.posted_at = None
            link.tries, link.retry_at, link.error = 0, None, None
        link.launched_at = now()
    return True


@dataclass(frozen=True)
class Score:
    """What the LMS is told: the score, the maximum, and the grading progress."""

    given: float
    maximum: float
    progress: str  # FullyGraded, or PendingManual while a person has parts to grade

    def same(self, other: Score | None) -> bool:
        return (
            other is not None
            and math.isclose(self.given, other.given, abs_tol=1e-9)
            and math.isclose(self.maximum, other.maximum, abs_tol=1e-9)
            and self.progress == other.progress
        )

    def better(self, other: Score | None) -> bool:
        """Whether this standing beats ``other`` as the best one: a higher score, or the
        same score graded further."""
        if other is None or self.given > other.given + 1e-9:
            return True
        return math.isclose(self.given, other.given, abs_tol=1e-9) and not self.same(other)


def score_of(given, maximum, progress) -> Score | None:
    return None if given is None else Score(float(given), float(maximum), progress)


def wanted(mode: str, current: Score, best: Score | None) -> Score:
    """What to post: the latest standing, or (``"best"``) the best one seen."""
    if mode == "best" and best is not None and not current.better(best):
        return best
    return current


@dataclass(frozen=True)
class Due:
    """A score to post, and where."""

    link_id: int
    issuer: str
    client_id: str
    lti_user: str
    lineitem: str
    scope: list[str]
    tries: int
    score: Score


class Poster:
    """Posts each student's standing to their LMS line item once per change: it polls the
    gradebook's standings (``submissions``) against what ``lti_links`` says was posted, so
    uploads, marks, regrades and late changes all post, after a restart too.  A failed
    post is logged and tried again later (10 s, then doubling up to an hour)."""

    def __init__(self, engine: Engine, tool: Tool, every: float = POLL_SECONDS,
                 first_retry: float = FIRST_RETRY_SECONDS):  # fmt: skip
        self.engine, self.tool, self.every, self.first_retry = engine, tool, every, first_retry
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="scalegrade-lti", daemon=True)

    def start(self) -> Poster:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout=HTTP_SECONDS + 5)

    def _run(self) -> None:
        while not self.stopping.wait(self.every):
            try:
                self.run_once()
            except Exception:  # the poster must outlive a database hiccup
                log.exception("LTI: looking for scores to post failed; trying again")

    def run_once(self) -> int:
        """Post every score that changed since it was last posted (and is not waiting
        for a retry); how many were posted."""
        with self.lock:
            posted, connectors = 0, {}
            for due in self.due():
                posted += self._post(due, connectors)
            return posted

    def due(self) -> list[Due]:
        """The scores that differ from what was posted, the best seen recorded."""
        mode, at = self.tool.settings.score, time.time()
        out = []
        with Session(self.engine) as s, s.begin():
            rows = list(s.execute(
                select(LtiLink, Submission.id, Submission.score, Submission.max_score)
                .join(Submission, (Submission.assignment == LtiLink.assignment)
                      & (Submission.student_id == LtiLink.student_id))
            ))  # fmt: skip
            pending = set(s.scalars(
                select(PartGrade.submission_id).where(
                    PartGrade.status == "pending",
                    PartGrade.submission_id.in_([r[1] for r in rows]),
                )
            ))  # fmt: skip
            for link, submission, given, maximum in rows:
                progress = "PendingManual" if submission in pending else "FullyGraded"
                current = Score(float(given), float(maximum), progress)
                best = score_of(link.best_score, link.best_max, link.best_progress)
                if current.better(best):
                    link.best_score, link.best_max = current.given, current.maximum
                    link.best_progress = current.progress
                want = wanted(mode, current, best)
                sent = score_of(link.posted_score, link.posted_max, link.posted_progress)
                if want.same(sent) or (link.retry_at or 0) > at:
                    continue
                scope = json.loads(link.scope)
                out.append(Due(link.id, link.issuer, link.client_id, link.lti_user,
                               link.lineitem, scope, link.tries, want))  # fmt: skip
        return out

    def _post(self, due: Due, connectors: dict) -> bool:
        grade = (
            Grade()
            .set_score_given(due.score.given)
            .set_score_maximum(due.score.maximum)
            .set_activity_progress("Completed")
            .set_grading_progress(due.score.progress)
            .set_timestamp(datetime.now(UTC).isoformat(timespec="milliseconds"))
            .set_user_id(due.lti_user)
        )
        try:
            key = (due.issuer, due.client_id)
            if key not in connectors:  # one token per LMS and round
                registration = self.tool.registration(due.issuer, due.client_id)
                connectors[key] = ServiceConnector(registration, http())
            connectors[key].get_access_token(due.scope)  # its failures are failures
            ags = AssignmentsGradesService(
                connectors[key], {"scope": due.scope, "lineitem": due.lineitem}
            )
            try:
                ags.put_grade(grade)
            except requests.exceptions.JSONDecodeError:
                pass  # a 2xx answer whose body is not JSON: the score was taken
        except (LtiException, requests.RequestException, ValueError) as err:
            self._failed(due, err)
            return False
        self._posted(due)
        return True

    def _posted(self, due: Due) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(LtiLink)
                .where(LtiLink.id == due.link_id, LtiLink.lineitem == due.lineitem)
                .values(
                    posted_score=due.score.given,
                    posted_max=due.score.maximum,
                    posted_progress=due.score.progress,
                    posted_at=now(),
                    tries=0,
                    retry_at=None,
                    error=None,
                )  # fmt: skip
            )

    def _failed(self, due: Due, err: Exception) -> None:
        tries = due.tries + 1
        wait = min(LAST_RETRY_SECONDS, self.first_retry * 2 ** (tries - 1))
        log.warning("LTI: the score of link %s (%s) was not posted (try %d; again in %g s): "
                    "%s", due.link_id, due.lineitem, tries, wait, err)  # fmt: skip
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(LtiLink)
                .where(LtiLink.id == due.link_id)
                .values(tries=tries, retry_at=time.time() + wait, error=str(err)[:2000])
            )


def start_poster(config: ServeConfig, app) -> Poster | None:
    """`scalegrade serve`'s poster, when the platform is an LTI tool (its configuration
    loaded, and its key made, now)."""
    if config.lti is None:
        return None
    return Poster(app.state.platform.book.engine, tool_of(app)).start()
