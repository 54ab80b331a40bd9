"""Who a launch is, and which assignment its link names (:func:`admit`).

Who it is (:func:`account_for`): the LTI identity (issuer, subject) is bound to one
account, for good.  The first launch of an identity finds or makes the account of the
person's ROSTER id, read from the claims the tool configuration names (``roster_id``;
by default the LIS ``person_sourcedid``, then the custom parameter ``roster_id``): claims
the LMS fills from its student information system, never from anything the person
types.  Their role is the LMS's (:func:`role_of`).  A learner on no roster of the course
is refused and nothing is made; an account bound to another LTI identity is never taken
over.

Which assignment (:func:`assignment_of`): the link's custom parameter ``assignment``
(``tdlsm/hw1`` or ``tdlsm-hw1``), else the ``assignment`` query parameter of its target
link URI, else the ``resourceId`` of the link's AGS line item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import requests
from pylti1p3.exception import LtiException
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.requests import Request

from scalegrade.server.course import Course, Served
from scalegrade.server.lti.adapters import (
    DatabaseLaunchData,
    StarletteMessageLaunch,
    StarletteRequest,
)
from scalegrade.server.lti.config import AGS_CLAIM, Refused, Tool
from scalegrade.server.lti.passback import remember_link
from scalegrade.server.security import AccountError, Who, add_account
from scalegrade.server.store import Account

log = logging.getLogger(__name__)

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
CLAIM_SHORT = {"lis": CLAIM + "lis", "custom": CLAIM + "custom"}


def role_of(roles: list) -> str | None:
    """The platform's role for the LMS's roles: a teaching assistant or mentor is a TA, an
    instructor or administrator an instructor, a learner a student (in that order: Canvas
    sends a TA as an Instructor sub-role); None for anyone else."""
    context, admin = set(), False
    for role in roles:
        if not isinstance(role, str):
            continue
        if role.startswith(LIS + "membership"):
            principal, _, sub = role.removeprefix(LIS + "membership").partition("#")
            context |= {principal.strip("/") or sub, sub}
        elif role in (LIS + "system/person#Administrator",
                      LIS + "institution/person#Administrator"):  # fmt: skip
            admin = True
        elif "/" not in role and "#" not in role:  # a context role's short name
            context.add(role)
    if context & {"TeachingAssistant", "Mentor"}:
        return "ta"
    if admin or context & {"Instructor", "Administrator"}:
        return "instructor"
    if "Learner" in context:
        return "student"
    return None


def claim(body: dict, name: str) -> str | None:
    """The launch's value of ``name``: ``lis.FIELD`` and ``custom.FIELD`` in the LIS and
    custom claims, else a claim of that name; None when absent, empty, or a substitution
    variable the LMS could not fill (``$Canvas.user.sisSourceId`` as sent)."""
    head, _, field = name.partition(".")
    if head in CLAIM_SHORT and field:
        group = body.get(CLAIM_SHORT[head])
        value = group.get(field) if isinstance(group, dict) else None
    else:
        value = body.get(name)
    if not isinstance(value, str) or not value.strip() or value.startswith("$"):
        return None
    return value.strip()


def roster_id(body: dict, names: list[str]) -> str | None:
    return next((v for v in (claim(body, n) for n in names) if v is not None), None)


def _name(body: dict) -> str:
    given = " ".join(str(body.get(k) or "") for k in ("given_name", "family_name")).strip()
    return str(body.get("name") or given)[:400]


def account_for(engine: Engine, course: Course, identity: tuple[str, str], role: str,
                login: str | None, name: str = "") -> Who:  # fmt: skip
    """The account of the LTI ``identity``: the one bound to it; else the account of the
    roster id ``login`` (made, or an unbound one of the same role), bound to it now."""
    with Session(engine) as s:
        bound = s.scalar(
            select(Account).where(
                Account.lti_issuer == identity[0], Account.lti_subject == identity[1]
            )
        )
        known = s.scalar(select(Account).where(Account.login == login)) if login else None
    if bound is not None:
        return _relaunched(engine, bound, role)
    if login is None:
        raise Refused(403, "Your LMS sent no roster id for you, so ScaleGrade cannot tell "
                      "which student you are; nothing was recorded. Ask your instructor to "
                      "have the LMS send it (docs/platform.md, LTI 1.3).")  # fmt: skip
    students = course.students()
    if role == "student" and login not in students:
        raise Refused(403, f"Your roster id {login} is on no roster of this course, so "
                      "there is nothing here for you to submit; nothing was recorded. If you "
                      "are enrolled, ask your instructor to check the roster.")  # fmt: skip
    if role != "student" and login in students:
        raise Refused(403, f"{login} is a student's roster id here, but the LMS launched "
                      f"you as {role}: ask your instructor to correct the LMS or the "
                      "roster.")  # fmt: skip
    if known is not None and known.lti_issuer is not None:
        raise Refused(403, f"The account {login} is bound to another LMS identity, so "
                      "this launch cannot sign in to it. If it is yours, ask your "
                      "instructor.")  # fmt: skip
    if known is not None and known.role != role:
        raise Refused(403, f"The account {login} here is a {known.role}'s, and the LMS "
                      f"launched you as {role}: ask your instructor.")  # fmt: skip
    try:
        return add_account(engine, login, role, name=name if known is None else "", lti=identity)
    except (AccountError, IntegrityError) as err:
        raise Refused(403, f"Your account could not be made ({err}).") from None


def _relaunched(engine: Engine, account: Account, role: str) -> Who:
    """The account bound to this LTI identity; a TA made instructor in the LMS (or back)
    follows, a student never becomes staff, nor staff a student, by a launch."""
    if account.role == role:
        return Who(account.id, account.login, account.role, account.name or account.login)
    if "student" not in (account.role, role):
        return add_account(engine, account.login, role)
    raise Refused(403, f"Your account here ({account.login}) is a {account.role}'s, and the "
                  f"LMS launched you as {role}: ask your instructor.")  # fmt: skip


def assignment_of(body: dict, course: Course, resource_id: Callable[[], str | None]):
    """The assignment the link names: its custom parameter ``assignment``, else the
    ``assignment`` query parameter of its target link URI (Canvas: the URL of an external
    tool assignment), else its line item's ``resourceId`` (``resource_id()`` asks the LMS);
    None when it names none.  All three are in the signed launch."""
    named, source = claim(body, "custom.assignment"), "its custom parameter assignment"
    if named is None:
        target = str(body.get(CLAIM + "target_link_uri") or "")
        named = parse_qs(urlsplit(target).query).get("assignment", [None])[0]
        source = "the assignment of its target link URI"
    if named is None:
        named, source = resource_id(), "its line item's resourceId"
    if not named:
        return None
    served = course.assignments.get(named) or course.by_slug(named)
    if served is None:
        known = ", ".join(sorted(course.assignments))
        raise Refused(404, f"This LMS link names the assignment {named!r} ({source}), which "
                      f"this course does not serve. Your instructor sets it to one of: "
                      f"{known}.")  # fmt: skip
    return served


def _resource_id(launch: StarletteMessageLaunch, body: dict) -> str | None:
    endpoint = body.get(AGS_CLAIM)
    if not isinstance(endpoint, dict) or not endpoint.get("lineitem"):
        return None
    ags = launch.get_ags()
    if not ags.can_read_lineitem():
        return None
    try:
        return ags.get_lineitem().get_resource_id()
    except (LtiException, requests.RequestException, ValueError) as err:
        log.warning("LTI: the line item %s could not be read: %s", endpoint["lineitem"], err)
        return None


@dataclass(frozen=True)
class Admitted:
    who: Who
    served: Served | None  # the assignment the link names


def admit(request: Request, tool: Tool, params: dict[str, str], engine: Engine,
          course: Course) -> Admitted:  # fmt: skip
    """A launch checked and mapped to an account (and its assignment, and where the
    student's score goes); :class:`Refused` otherwise."""
    lti_request = StarletteRequest(request, params, tool.secure)
    launch = StarletteMessageLaunch(lti_request, tool, DatabaseLaunchData(engine))
    try:
        body = dict(launch.get_launch_data())
    except (LtiException, ValueError, TypeError, KeyError, AttributeError) as err:
        log.warning("LTI launch refused: %s", err)
        raise Refused(403, f"The launch from your LMS could not be checked ({err}). Open "
                      "ScaleGrade again from your course in the LMS.") from None  # fmt: skip
    if not launch.is_resource_launch():
        raise Refused(400, "ScaleGrade takes the LMS's resource link launches only.")
    roles = body.get(CLAIM + "roles") or []
    role = role_of(roles)
    if role is None:
        said = ", ".join(map(str, roles)) or "none"
        raise Refused(403, f"Your role in this course ({said}) has no place in ScaleGrade: "
                      "it serves learners, TAs and instructors.")  # fmt: skip
    served = assignment_of(body, course, lambda: _resource_id(launch, body))
    identity = (str(body["iss"]), str(body["sub"]))
    who = account_for(engine, course, identity, role,
                      roster_id(body, tool.settings.roster_id), _name(body))  # fmt: skip
    if who.student_id is not None and served is not None:
        if who.student_id not in served.keys:
            raise Refused(403, f"Your roster id {who.student_id} is not on the roster of "
                          f"{served.release.title}: ask your instructor.")  # fmt: skip
        remember_link(engine, served.name, who.student_id, body, launch.get_client_id())
    return Admitted(who, served)
