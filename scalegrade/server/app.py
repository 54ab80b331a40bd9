"""The ASGI application: Starlette, Jinja2 templates and vendored htmx, no JavaScript build.

:func:`create_app` opens the gradebook (and the platform's tables), reads the course, and
mounts the pages of each role (:mod:`.pages`).  Rules every route gets here, not in each
page, so a new page cannot forget them:

- every POST route checks the session's CSRF token before its endpoint runs, except the
  LTI routes, which the LMS posts and which check their own signed tokens
  (``CSRF_EXEMPT``);
- a request body over the upload cap is refused before it is read (413);
- every response carries a Content-Security-Policy of 'self' only, no framing but by the
  LMS, ``nosniff`` and no referrer.

The keys, the course secret, uploads and the session key are files outside anything
served: the only static files are htmx and the style, from this package.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from autograder.semester.gradebook import Gradebook
from scalegrade.server import store
from scalegrade.server.config import ServeConfig
from scalegrade.server.course import Course
from scalegrade.server.pages import ROUTES
from scalegrade.server.pages.common import refuse
from scalegrade.server.platform import HERE, Platform, templates
from scalegrade.server.queue import Queue
from scalegrade.server.security import SESSION_SECONDS, csrf_ok, session_key

CSRF_EXEMPT = ("/lti/",)  # the LMS posts these; they check their own signed tokens
FORM_OVERHEAD = 64 * 1024  # a form's bytes besides the notebook it uploads


def _csrf_checked(endpoint):
    """``endpoint`` behind the session's CSRF token (the ``csrf`` field or header)."""

    async def checked(request: Request) -> Response:
        given = request.headers.get("x-csrf-token")
        if given is None and request.headers.get("content-type", "").startswith(
            ("multipart/form-data", "application/x-www-form-urlencoded")
        ):
            given = (await request.form()).get("csrf")
        if not csrf_ok(request.session.get("csrf"), given):
            return refuse(request, 403, "This form has expired. Go back, reload the page "
                          "and send it again.")  # fmt: skip
        return await endpoint(request)

    checked.csrf_checked = True
    return checked


def _guarded(routes: list) -> list:
    out = []
    for route in routes:
        if (
            isinstance(route, Route)
            and "POST" in (route.methods or ())
            and not route.path.startswith(CSRF_EXEMPT)
        ):
            route = Route(route.path, _csrf_checked(route.endpoint), methods=route.methods,
                          name=route.name)  # fmt: skip
        out.append(route)
    return out


class _Headers:
    """Security headers on every response; a body over ``limit`` bytes refused unread."""

    def __init__(self, app, cap: int, frame_ancestors: str):
        self.app, self.cap = app, cap
        self.limit = cap + FORM_OVERHEAD
        self.headers = [
            (b"content-security-policy",
             f"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
             f"frame-ancestors {frame_ancestors}; form-action 'self'; base-uri 'none'".encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
        ]  # fmt: skip

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            response = Response(
                f"This upload is larger than the {self.cap / 2**20:g} MiB accepted: clear the "
                "notebook's outputs (Edit > Clear all outputs), save, and upload it again.",
                status_code=413,
            )
            return await response(scope, receive, send)

        async def sending(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + self.headers
            await send(message)

        return await self.app(scope, receive, sending)


async def _refused(request: Request, exc: HTTPException) -> Response:
    """An HTTP error as a page in the layout (a redirect as itself)."""
    if exc.status_code in (301, 302, 303, 307):
        return Response(status_code=exc.status_code, headers=exc.headers)
    why = (
        exc.detail
        if exc.status_code != 404 or exc.detail != "Not Found"
        else ("There is no such page.")
    )
    return refuse(request, exc.status_code, why)


def create_app(config: ServeConfig) -> Starlette:
    """The platform for ``config``: its gradebook migrated, its course's releases recorded."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    book = Gradebook(config.db_url)
    store.migrate(book.engine)
    course = Course(config.course)
    course.record(book, config.data_dir)
    routes = _guarded(list(ROUTES)) + [
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    ]
    lms = "*" if config.lti else "'none'"
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _refused},
        middleware=[
            Middleware(_Headers, cap=config.upload_max_bytes, frame_ancestors=lms),
            Middleware(
                SessionMiddleware,
                secret_key=session_key(config.data_dir),
                session_cookie="scalegrade",
                max_age=SESSION_SECONDS,
                same_site="none" if config.lti and config.cookies_secure else "lax",
                https_only=config.cookies_secure,
            ),
        ],  # fmt: skip
    )
    app.state.platform = Platform(config, book, Queue(book.engine), course, templates())
    return app
