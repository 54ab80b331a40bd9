"""A local LTI 1.3 platform (an LMS) for the LTI tests: lti1p3platform's platform side
(OIDC login initiation, the signed launch, the OAuth2 token endpoint, the AGS line items
and scores) in a small Starlette app, with its own RSA keys, served on 127.0.0.1.

It knows a few people (``USERS``: login hint -> their LTI subject, roles and claims) and
a few resource links (``LINKS``); it records every score a tool posts (``scores``).  A
test may change what it signs next (``tamper``: claims over the launch's), or make its
score endpoint fail (``fail_scores``: that many posts answered 500), or sign tokens
already expired (``expires_in``).
"""

from __future__ import annotations

import contextlib
import html
import json
import socket
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.exceptions import LineItemNotFoundException
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as PlatformRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "scalegrade-tool"
DEPLOYMENT_ID = "deployment-1"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER = MEMBERSHIP + "#Learner"
INSTRUCTOR = MEMBERSHIP + "#Instructor"
TEACHING_ASSISTANT = MEMBERSHIP + "/Instructor#TeachingAssistant"
LIS_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/lis"


@dataclass
class User:
    sub: str  # the platform's stable id for them (the LTI subject)
    name: str
    roles: list[str]
    sis_id: str | None = None  # sent as lis.person_sourcedid
    custom: dict[str, str] = field(default_factory=dict)  # custom parameters of theirs


@dataclass
class Link:
    """A resource link in the course: its custom parameters and its line item."""

    custom: dict[str, str]
    lineitem: str  # an id of ``LINEITEMS``
    query: str = ""  # added to the tool's launch URL as the link's target link URI


def private_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def public_pem(private: str) -> str:
    key = serialization.load_pem_private_key(private.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app, port: int):
    """``app`` under uvicorn on 127.0.0.1:``port`` in a thread, until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class PlatformConf(LTI1P3PlatformConfAbstract):
    """The platform's one registration: the ScaleGrade tool."""

    def init_platform_config(self, **kwargs) -> None:
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs) -> Registration:
        return self._registration


class Lms:
    def __init__(self, port: int, tool_url: str):
        self.url = f"http://127.0.0.1:{port}"
        self.port = port
        key = private_pem()
        self.registration = (
            Registration()
            .set_iss(self.url)
            .set_client_id(CLIENT_ID)
            .set_deployment_id(DEPLOYMENT_ID)
            .set_oidc_login_url(tool_url + "/lti/login")
            .set_launch_url(tool_url + "/lti/launch")
            .set_tool_key_set_url(tool_url + "/lti/jwks")
            .set_platform_private_key(key)
            .set_platform_public_key(public_pem(key))
        )
        self.users: dict[str, User] = {}
        self.links: dict[str, Link] = {}
        self.lineitems: dict[str, dict] = {}
        self.scores: list[tuple[str, dict]] = []  # (line item id, the score as posted)
        self.tamper: dict = {}
        self.expires_in = 300  # seconds an id_token is good for
        self.fail_scores = 0
        self.app = Starlette(
            routes=[
                Route("/course/links/{link}", self.start_launch),
                Route("/authorize", self.authorize),
                Route("/jwks", self.jwks),
                Route("/token", self.token, methods=["POST"]),
                Route("/lineitems/{item}", self.lineitem),
                Route("/lineitems/{item}/scores", self.score, methods=["POST"]),
            ]
        )

    def lineitem_url(self, item: str) -> str:
        return f"{self.url}/lineitems/{item}"

    def add_lineitem(self, item: str, **fields) -> None:
        self.lineitems[item] = {"id": self.lineitem_url(item), **fields}

    def tool_entry(self) -> dict:
        """This platform as the tool's configuration names it."""
        return {
            "client_id": CLIENT_ID,
            "auth_login_url": self.url + "/authorize",
            "auth_token_url": self.url + "/token",
            "key_set_url": self.url + "/jwks",
            "deployment_ids": [DEPLOYMENT_ID],
        }

    def conf(self) -> PlatformConf:
        return PlatformConf(registration=self.registration)

    # --- the routes ---------------------------------------------------------------------

    async def start_launch(self, request: Request) -> Response:
        """A person opens a link in the course: the OIDC login at the tool."""
        login = _Login(request, self.conf())
        login.set_lti_message_hint(link=request.path_params["link"])
        return login.initiate_login(request.query_params["user"])

    async def authorize(self, request: Request) -> Response:
        """The tool's authentication request: the signed launch, as a self-posting form."""
        params = dict(request.query_params)
        if params.get("redirect_uri") != self.registration.get_launch_url():
            return Response("redirect_uri is not the tool's launch URL", status_code=400)
        user = self.users.get(params.get("login_hint", ""))
        link = self.links.get(params.get("lti_message_hint", ""))
        if user is None or link is None:
            return Response("unknown user or link", status_code=400)
        return _Launch(request, self.conf(), self, user, params["lti_message_hint"]).lti_launch()

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": self.registration.get_jwks()})

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        try:
            return JSONResponse(self.conf().get_access_token(form))
        except Exception as err:  # noqa: BLE001 - an LMS answers a bad request with 400
            return JSONResponse({"error": "invalid_request", "detail": str(err)}, 400)

    async def lineitem(self, request: Request) -> Response:
        service = await self._service(request)
        item = request.path_params["item"]
        return _answer(service.handle_resp(service.handle_get_lineitem, line_item_id=item))

    async def score(self, request: Request) -> Response:
        if self.fail_scores > 0:
            self.fail_scores -= 1
            return Response("the gradebook is down", status_code=500)
        service = await self._service(request)
        item = request.path_params["item"]
        return _answer(service.handle_resp(service.handle_update_score, line_item_id=item))

    async def _service(self, request: Request) -> _Grades:
        body = await request.body()
        data = {
            "method": request.method,
            "form_data": {},
            "get_data": dict(request.query_params),
            "headers": request.headers,
            "content_type": request.headers.get("content-type"),
            "path": request.url.path,
            "json": json.loads(body) if body else None,
        }
        item = request.path_params["item"]
        return _Grades(
            _Req(data), self.conf(), self, self.url + "/lineitems", self.lineitem_url(item)
        )


def _answer(response) -> Response:
    if response.result is None:  # a score taken: no body; an error: what is wrong
        return Response("" if response.code < 300 else response.message, response.code)
    return JSONResponse(response.result, status_code=response.code, media_type=response.media_type)


class _Req(PlatformRequest):
    def build_metadata(self, request):
        return request


class _Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs) -> None:
        self._lti_message_hint = kwargs["link"]

    def get_redirect(self, url: str) -> Response:
        return RedirectResponse(url, status_code=302)


class _Launch(LTIAdvantageMessageLaunchAbstract):
    def __init__(self, request, conf, lms: Lms, user: User, link_id: str):
        super().__init__(request, conf)
        self.lms, self.user, self.link_id = lms, user, link_id

    def get_preflight_response(self) -> dict:
        return dict(self._request.query_params)

    def prepare_launch(self, preflight_response: dict) -> None:
        link = self.lms.links[self.link_id]
        self.set_id_token_expiration(self.lms.expires_in)
        if link.query:
            self.set_launch_url(f"{self.lms.registration.get_launch_url()}?{link.query}")
        self.set_user_data(self.user.sub, self.user.roles, full_name=self.user.name)
        self.set_resource_link_claim(self.link_id, title=f"Link {self.link_id}")
        self.set_launch_context_claim("course-1", context_title="Training large models")
        self.set_custom_parameters_claim({**link.custom, **self.user.custom})
        self.set_ags(
            lineitems_url=self.lms.url + "/lineitems",
            lineitem_url=self.lms.lineitem_url(link.lineitem),
            allow_creating_lineitems=False,
        )
        if self.user.sis_id is not None:
            self.set_extra_claims({LIS_CLAIM: {"person_sourcedid": self.user.sis_id}})

    def get_launch_message(self, include_extra_claims: bool = True) -> dict:
        return {**super().get_launch_message(include_extra_claims), **self.lms.tamper}

    def render_launch_form(self, launch_data: dict, **kwargs) -> Response:
        fields = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(launch_data[k])}">'
            for k in ("id_token", "state")
        )
        return HTMLResponse(
            f'<form method="post" action="{html.escape(launch_data["launch_url"])}">'
            f"{fields}</form><script>document.forms[0].submit()</script>"
        )


class _Grades(AssignmentsGradesService):
    """The AGS line items and scores of the course, in memory."""

    def __init__(self, request, conf, lms: Lms, lineitems_url: str, lineitem_url: str):
        super().__init__(request, conf, lineitems_url, lineitem_url, False)
        self.lms = lms

    def find_lineitem(self, line_item_id: str):
        if line_item_id not in self.lms.lineitems:
            raise LineItemNotFoundException(line_item_id)
        return self.lms.lineitems[line_item_id]

    def update_score(self, line_item_id: str, score) -> UpdateScoreStatus:
        self.find_lineitem(line_item_id)
        self.lms.scores.append((line_item_id, score))
        return UpdateScoreStatus.SUCCESS

    def find_lineitems(self, *args, **kwargs):
        raise NotImplementedError("not used by the tests")

    def create_lineitem(self, creation_data):
        raise NotImplementedError("not used by the tests")

    def update_lineitem(self, update_data):
        raise NotImplementedError("not used by the tests")

    def delete_lineitem(self, line_item_id: str) -> None:
        raise NotImplementedError("not used by the tests")

    def get_results(self, *args, **kwargs):
        raise NotImplementedError("not used by the tests")
