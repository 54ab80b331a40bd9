"""What every page shares: rendering in the layout, refusing, and who may see it."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from scalegrade.server.course import CourseError
from scalegrade.server.platform import platform
from scalegrade.server.security import Who, csrf_token, who

log = logging.getLogger(__name__)


def signed_in(request: Request) -> Who | None:
    """The session's account, read from the database now (None: nobody signed in)."""
    return who(platform(request).book.engine, request.session.get("account"))


class Redirect(HTTPException):
    def __init__(self, url: str):
        super().__init__(303, headers={"location": url})


def require(request: Request, *roles: str) -> Who:
    """The signed-in account, if its role is one of ``roles``; else to the sign-in page
    (nobody signed in) or 403."""
    account = signed_in(request)
    try:
        platform(request).course.refresh()  # keys a rekey or a reseed wrote since
    except CourseError as err:
        log.error("%s (serving the keys read before)", err)
    if account is None:
        raise Redirect(f"/signin?next={request.url.path}")
    if account.role not in roles:
        raise HTTPException(403, "This page is not open to your role.")
    return account


def page(request: Request, template: str, status: int = 200, **context) -> Response:
    """``template`` in the layout, with the signed-in account and the session's CSRF token
    (made when the session has none)."""
    if "csrf" not in request.session:
        request.session["csrf"] = csrf_token()
    return platform(request).templates.TemplateResponse(
        request,
        template,
        {"who": signed_in(request), "csrf": request.session["csrf"], **context},
        status_code=status,
    )


def refuse(request: Request, status: int, why: str) -> Response:
    """A clear page saying why (an error page in the layout, never a stack trace)."""
    return page(request, "refused.html", status=status, why=why)


def redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303)
