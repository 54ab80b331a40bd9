"""pylti1p3 on Starlette: the request, cookies, redirect, launch data and session
services pylti1p3 asks for, and the OIDC login and message launch built on them.

A launch is an OIDC login (the LMS sends the browser to ``/lti/login``; we send it back
with a state and a nonce, :func:`login_redirect`) then a signed ``id_token`` posted to
``/lti/launch``.  We check it (:class:`StarletteMessageLaunch`): the state and the nonce
are ones we issued and are used once (kept in the database, :class:`DatabaseLaunchData`,
not in a cookie: an LMS frame may not get third-party cookies), the signature is the
platform's (its JWKS), the audience is our client id, the deployment is registered, and
the message is a resource link launch.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import jwt
import requests
from pylti1p3.cookie import CookieService
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.request import Request as LtiRequest
from pylti1p3.session import SessionService
from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from scalegrade.server.lti.config import HTTP_SECONDS, Refused, Tool
from scalegrade.server.store import LtiLaunchData, now

log = logging.getLogger(__name__)

LOGIN_SECONDS = 600  # an OIDC login's state and nonce are good this long, once
KEYS_SECONDS = 300  # a platform's public keys are cached this long
LEEWAY_SECONDS = 30  # of clock skew between the LMS and us


class _TimedSession(requests.Session):
    """Every request to the LMS with a timeout, so no launch or post waits forever."""

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", HTTP_SECONDS)
        return super().request(*args, **kwargs)


def http() -> requests.Session:
    session = _TimedSession()
    session.headers["User-Agent"] = "ScaleGrade-LTI"
    return session


class StarletteRequest(LtiRequest):
    """A Starlette request as pylti1p3 reads it: its parameters (the query of a GET, the
    form of a POST, read already), its cookies, and whether the platform is on https."""

    def __init__(self, request: Request, params: dict[str, str], secure: bool):
        self._request, self._params, self._secure = request, params, secure

    @property
    def session(self):
        return self._request.session

    def is_secure(self) -> bool:
        return self._secure

    def get_param(self, key: str) -> str | None:  # type: ignore[override]
        return self._params.get(key)

    def get_cookie(self, key: str) -> str | None:
        return self._request.cookies.get(key)


class StarletteCookies(CookieService):
    """pylti1p3's cookies (the login's state): read from the request, set on the
    response, for ``/lti/`` only."""

    def __init__(self, request: StarletteRequest):
        self._request = request
        self._to_set: dict[str, tuple[str, int | None]] = {}

    def _name(self, name: str) -> str:
        return f"{self._cookie_prefix}-{name}"

    def get_cookie(self, name: str) -> str | None:
        return self._request.get_cookie(self._name(name))

    def set_cookie(self, name: str, value, exp: int | None = 3600):
        self._to_set[self._name(name)] = (str(value), exp)

    def update_response(self, response: Response) -> None:
        secure = self._request.is_secure()
        for name, (value, exp) in self._to_set.items():
            response.set_cookie(name, value, max_age=exp, path="/lti/", secure=secure,
                                httponly=True, samesite="none" if secure else "lax")  # fmt: skip


class StarletteRedirect(Redirect[Response]):
    def __init__(self, location: str, cookies: StarletteCookies):
        self._location, self._cookies = location, cookies

    def do_redirect(self) -> Response:
        response = RedirectResponse(self._location, status_code=302)
        self._cookies.update_response(response)
        return response

    def do_js_redirect(self) -> Response:
        """A plain redirect: the pages' CSP allows no inline script, and a frame follows a
        302 as well."""
        return self.do_redirect()

    def set_redirect_url(self, location: str):
        self._location = location

    def get_redirect_url(self) -> str:
        return self._location


class DatabaseLaunchData(LaunchDataStorage[Any]):
    """pylti1p3's launch data in the platform's database (``lti_launch_data``), not in
    the browser: an LMS frame may get no third-party cookie, and the values kept (each
    login's state and nonce, the platforms' keys) are random or public, so they need no
    per-browser namespace."""

    def __init__(self, engine: Engine):
        super().__init__()
        self._engine = engine

    def get_session_cookie_name(self) -> None:
        return None

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str) -> Any:
        with Session(self._engine) as s:
            row = s.get(LtiLaunchData, self._prepare_key(key))
        if row is None or row.expires_at <= time.time():
            return None
        return json.loads(row.value)

    def set_value(self, key: str, value: Any, exp: int | None = None) -> None:
        at = time.time()
        with Session(self._engine) as s, s.begin():
            s.execute(delete(LtiLaunchData).where(LtiLaunchData.expires_at <= at))
            s.merge(LtiLaunchData(name=self._prepare_key(key), value=json.dumps(value),
                                  expires_at=at + (exp or LOGIN_SECONDS)))  # fmt: skip

    def check_value(self, key: str) -> bool:
        return self.get_value(key) is not None

    def take(self, key: str) -> bool:
        """Whether ``key`` was there (and not expired); it is gone after, whoever asks."""
        with Session(self._engine) as s, s.begin():
            gone = s.execute(
                delete(LtiLaunchData).where(
                    LtiLaunchData.name == self._prepare_key(key),
                    LtiLaunchData.expires_at > time.time(),
                )
            )
        return gone.rowcount == 1


class LaunchSession(SessionService):
    """pylti1p3's session service over :class:`DatabaseLaunchData`: each login's state
    and nonce are good for one launch, within :data:`LOGIN_SECONDS`."""

    data_storage: DatabaseLaunchData

    def __init__(self, request: StarletteRequest, storage: DatabaseLaunchData):
        super().__init__(request)
        self.set_data_storage(storage)
        self._launch_data_lifetime = LOGIN_SECONDS

    def check_nonce(self, nonce: str) -> bool:
        return self.data_storage.take(self._get_key("nonce", nonce))

    def take_state(self, state: str) -> bool:
        return self.data_storage.take(self._get_key(state))


class StarletteOIDCLogin(OIDCLogin):
    def get_redirect(self, url: str) -> StarletteRedirect:
        return StarletteRedirect(url, self._cookie_service)


class StarletteMessageLaunch(MessageLaunch):
    """pylti1p3's launch, stricter where it trusts a cookie or skips a claim:

    - the state must be one our login issued, and is used once (pylti1p3 accepts the
      state cookie alone, and a state again for the same token); the state cookie, when
      the browser sends it, must match, and with ``"state_cookie": "required"`` it must
      be sent;
    - the nonce is used once (pylti1p3 only looks it up);
    - the signature is checked with the audience (our client id, and ``azp`` when there
      are several), the issuer, ``exp`` and ``iat`` (pylti1p3 skips the audience);
    - nothing of the launch is kept but what :func:`.identity.admit` records."""

    def __init__(self, request: StarletteRequest, tool: Tool, storage: DatabaseLaunchData):
        super().__init__(request, tool.conf, LaunchSession(request, storage),
                         StarletteCookies(request), storage, http())  # fmt: skip
        self._state_cookie = tool.settings.state_cookie
        self.set_public_key_caching(storage, KEYS_SECONDS)

    def _get_request_param(self, key: str) -> str:
        return self._request.get_param(key)

    def validate_state(self) -> StarletteMessageLaunch:
        state = self._get_request_param("state")
        if not state:
            raise LtiException("the launch carries no state")
        cookie = self._cookie_service.get_cookie(state)
        if cookie is not None and cookie != state:
            raise LtiException("the launch's state is not this browser's")
        if cookie is None and self._state_cookie == "required":
            raise LtiException("this browser did not start this launch (no state cookie)")
        if not self._session_service.take_state(state):
            raise LtiException("this launch was used already, or it expired")
        return self

    def validate_jwt_signature(self) -> StarletteMessageLaunch:
        id_token = self._get_id_token()
        key, alg = self.get_public_key()
        client_id = self._registration.get_client_id()
        try:
            body = jwt.decode(id_token, key, algorithms=[alg], audience=client_id,
                              issuer=self.get_iss(), leeway=LEEWAY_SECONDS,
                              options={"require": ["exp", "iat", "iss", "aud"]})  # fmt: skip
        except jwt.InvalidTokenError as err:
            raise LtiException(f"the id_token does not check: {err}") from None
        aud = body["aud"]
        if isinstance(aud, list) and len(aud) > 1 and body.get("azp") != client_id:
            raise LtiException("the id_token is for several audiences and azp is not ours")
        return self

    def save_launch_data(self) -> StarletteMessageLaunch:
        return self


def login_redirect(request: Request, tool: Tool, params: dict[str, str], engine: Engine):
    """The OIDC login: the LMS's request checked, the browser sent back to it with a new
    state and nonce (kept for one launch)."""
    lti_request = StarletteRequest(request, params, tool.secure)
    storage = DatabaseLaunchData(engine)
    cookies = StarletteCookies(lti_request)
    session = LaunchSession(lti_request, storage)
    login = StarletteOIDCLogin(lti_request, tool.conf, session, cookies, storage)
    try:
        return login.pass_params_to_launch({"started": now()}).redirect(tool.launch_url)
    except (OIDCException, LtiException) as err:
        log.warning("LTI login refused: %s", err)
        raise Refused(400, f"The login request from your LMS could not be used ({err}). "
                      "Open ScaleGrade again from your course in the LMS.") from None  # fmt: skip
