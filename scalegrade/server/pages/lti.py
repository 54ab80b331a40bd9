"""LTI 1.3 launches from the LMS (:mod:`scalegrade.server.lti`): the OIDC login, the
launch that signs the person in, and the tool's public keys.

The LMS posts to these routes from another site, so the platform's CSRF check does not
apply (app.py exempts ``/lti/``): each request proves itself instead, the login by the
LMS's registration, the launch by a signed token bound to a state and a nonce we issued
and used once.  A launch is checked in a worker thread, since it may fetch the LMS's keys.
"""

from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalegrade.server.lti.adapters import login_redirect
from scalegrade.server.lti.config import LtiConfigError, Refused, Tool, tool_of
from scalegrade.server.lti.identity import admit
from scalegrade.server.pages.auth import START
from scalegrade.server.pages.common import redirect, refuse
from scalegrade.server.platform import platform
from scalegrade.server.security import csrf_token

log = logging.getLogger(__name__)


def _tool(request: Request) -> Tool:
    try:
        return tool_of(request.app)
    except LtiConfigError as err:
        log.error("%s", err)
        why = "ScaleGrade's LTI configuration cannot be used just now (the server's log says why)."
        raise Refused(503, why) from None


async def _params(request: Request) -> dict[str, str]:
    """The request's parameters: the query of a GET, the form of a POST (Canvas posts
    its login; Moodle may get it)."""
    if request.method == "GET":
        return dict(request.query_params)
    form = await request.form(max_files=0, max_fields=32)
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def login(request: Request) -> Response:
    """The OIDC login the LMS starts: back to the LMS with a state and a nonce."""
    try:
        tool, params = _tool(request), await _params(request)
        engine = platform(request).book.engine
        return await run_in_threadpool(login_redirect, request, tool, params, engine)
    except Refused as no:
        return refuse(request, no.status, no.why)


async def launch(request: Request) -> Response:
    """The LMS's signed launch: the person signed in, and sent to their assignment."""
    p = platform(request)
    try:
        tool, params = _tool(request), await _params(request)
        admitted = await run_in_threadpool(admit, request, tool, params, p.book.engine,
                                           p.course)  # fmt: skip
    except Refused as no:
        request.session.clear()  # a launch turned away leaves nobody signed in here
        return refuse(request, no.status, no.why)
    request.session.clear()  # a new session: no fixation
    request.session.update(account=admitted.who.id, csrf=csrf_token())
    if admitted.who.role == "student":
        return redirect(f"/a/{admitted.served.slug}" if admitted.served else START["student"])
    return redirect(START[admitted.who.role])


async def jwks(request: Request) -> Response:
    """The tool's public key, as the LMS fetches it to check our AGS requests."""
    try:
        return JSONResponse(_tool(request).jwks())
    except Refused as no:
        return refuse(request, no.status, no.why)


ROUTES = [
    Route("/lti/login", login, methods=["GET", "POST"]),
    Route("/lti/launch", launch, methods=["POST"]),
    Route("/lti/jwks", jwks, methods=["GET"]),
]
