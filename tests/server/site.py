"""A test's view of the platform: clients signed in as someone, forms sent with the
session's CSRF token as a browser sends them."""

from __future__ import annotations

import re
import warnings

PASSWORD = "correct horse battery staple"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


class Site:
    """The application in process (Starlette's test client: the real app, over ASGI)."""

    def __init__(self, app):
        self.app = app

    @property
    def platform(self):
        return self.app.state.platform

    def client(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # starlette's note on httpx versions
            from starlette.testclient import TestClient

        return TestClient(self.app, follow_redirects=False)

    def as_(self, login: str, password: str = PASSWORD):
        """A client signed in as ``login``."""
        c = self.client()
        token = csrf_of(c.get("/signin").text)
        r = c.post("/signin", data={"login": login, "password": password, "csrf": token})
        assert r.status_code == 303, r.text
        return c


def post_form(client, page: str, action: str, data: dict | None = None, files=None):
    """POST ``action`` as the form on ``page`` does: with that page's CSRF token."""
    token = csrf_of(client.get(page).text)
    return client.post(action, data={**(data or {}), "csrf": token}, files=files)
