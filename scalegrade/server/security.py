"""Who may do what: passwords, the session, CSRF tokens, roles and upload limits.

- A password is kept as scrypt (n=2^14, r=8, p=1, 16-byte salt), compared in constant time.
- The session is a cookie signed with the platform's key (``DATA/session.key``, made once,
  0600; never served): HttpOnly, SameSite=Lax, Secure when the platform is served over
  https.  It holds the account's id and the session's CSRF token, nothing a page trusts
  beyond that: the account, and so the role and the student id, is read from the
  database on every request.  No student id is ever taken from a form, a URL or a notebook.
- Every state-changing request (POST) must carry the session's CSRF token, as the form's
  ``csrf`` field or the ``X-CSRF-Token`` header (htmx sends it); otherwise 403.
- Uploads per student and minute are counted from the queue itself, so the limit holds
  across restarts and server processes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scalegrade.server.store import ROLES, Account, Job, now

SCRYPT = dict(n=2**14, r=8, p=1, dklen=32)
KEY_FILE = "session.key"
SESSION_SECONDS = 12 * 3600


class AccountError(ValueError):
    """An account that cannot be made or changed: which, and why."""


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
    return "scrypt$" + base64.b64encode(salt).decode() + "$" + base64.b64encode(digest).decode()


def check_password(password: str, stored: str | None) -> bool:
    """``password`` against a stored hash; False for an account without a password."""
    try:
        kind, salt, digest = (stored or "").split("$")
    except ValueError:
        return False
    if kind != "scrypt":
        return False
    given = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), **SCRYPT)
    return hmac.compare_digest(given, base64.b64decode(digest))


def session_key(data: Path) -> str:
    """The key that signs sessions: made once under the data folder, readable by its owner
    only."""
    path = Path(data) / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


@dataclass(frozen=True)
class Who:
    """The signed-in account, as the database says now."""

    id: int
    login: str
    role: str
    name: str

    @property
    def student_id(self) -> str | None:
        return self.login if self.role == "student" else None


def who(engine: Engine, account_id: object) -> Who | None:
    if not isinstance(account_id, int):
        return None
    with Session(engine) as s:
        a = s.get(Account, account_id)
    return None if a is None else Who(a.id, a.login, a.role, a.name or a.login)


def sign_in(engine: Engine, login: str, password: str) -> Who | None:
    with Session(engine) as s:
        a = s.scalar(select(Account).where(Account.login == login))
    if a is None:
        check_password(password, hash_password("timing"))  # as slow as a real check
        return None
    if not check_password(password, a.password):
        return None
    return Who(a.id, a.login, a.role, a.name or a.login)


def add_account(
    engine: Engine,
    login: str,
    role: str,
    *,
    name: str = "",
    password: str | None = None,
    lti: tuple[str, str] | None = None,
) -> Who:
    """Make an account, or change the role, name and password of an existing one."""
    login = login.strip()
    if role not in ROLES:
        raise AccountError(f"{login}: role {role!r} is not one of {', '.join(ROLES)}")
    if not login or len(login) > 200:
        raise AccountError("a login is 1 to 200 characters (a student's: their roster id)")
    with Session(engine) as s, s.begin():
        a = s.scalar(select(Account).where(Account.login == login))
        if a is None:
            a = Account(login=login, created_at=now())
            s.add(a)
        a.role, a.name = role, name or a.name or ""
        if password is not None:
            a.password = hash_password(password)
        if lti is not None:
            a.lti_issuer, a.lti_subject = lti
        s.flush()
        return Who(a.id, a.login, a.role, a.name or a.login)


def csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(session_token: object, given: object) -> bool:
    return (
        isinstance(session_token, str)
        and isinstance(given, str)
        and bool(session_token)
        and hmac.compare_digest(session_token, given)
    )


def uploads_last_minute(engine: Engine, student_id: str) -> int:
    """The student's uploads in the last 60 seconds (all assignments), from the queue."""
    from datetime import UTC, datetime, timedelta

    since = (datetime.now(UTC) - timedelta(seconds=60)).isoformat(timespec="milliseconds")
    with Session(engine) as s:
        return int(
            s.scalar(
                select(func.count(Job.id)).where(
                    Job.student_id == student_id, Job.submitted_at >= since
                )
            )
            or 0
        )
