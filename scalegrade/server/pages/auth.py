"""Signing in and out, and each role's start page."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.routing import Route

from scalegrade.server.pages.common import page, redirect, signed_in
from scalegrade.server.platform import platform
from scalegrade.server.security import csrf_token, sign_in

START = {"student": "/a", "ta": "/mark", "instructor": "/course"}


def _local(url: str | None) -> str | None:
    """``url`` if it is a path of this site (never another site: no open redirect)."""
    if not url:
        return None
    parts = urlsplit(url)
    ok = url.startswith("/") and not url.startswith("//") and not parts.scheme and not parts.netloc
    return url if ok and "\\" not in url else None


async def home(request: Request):
    account = signed_in(request)
    return redirect(START[account.role] if account else "/signin")


async def signin_form(request: Request):
    return page(request, "signin.html", next=_local(request.query_params.get("next")) or "")


async def signin(request: Request):
    form = await request.form()
    login, password = str(form.get("login", "")), str(form.get("password", ""))
    account = sign_in(platform(request).book.engine, login.strip(), password)
    if account is None:
        return page(request, "signin.html", status=401, login=login, next=form.get("next", ""),
                    problem="That login and password do not match an account.")  # fmt: skip
    request.session.clear()  # a new session: no fixation
    request.session.update(account=account.id, csrf=csrf_token())
    return redirect(_local(str(form.get("next", ""))) or START[account.role])


async def signout(request: Request):
    request.session.clear()
    return redirect("/signin")


ROUTES = [
    Route("/", home),
    Route("/signin", signin_form, methods=["GET"]),
    Route("/signin", signin, methods=["POST"]),
    Route("/signout", signout, methods=["POST"]),
]
