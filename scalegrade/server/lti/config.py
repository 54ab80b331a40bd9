"""The LTI tool's configuration: the JSON file that ``lti`` names in serve.toml
(docs/platform.md describes it), loaded (:func:`load_tool`) into the LMS registrations
pylti1p3 reads, with the tool's key pair and options; and the errors of the LTI package.

Its private key is ``DATA/lti-private.pem`` (0600, made on first start) or the file the
JSON names; ``/lti/jwks`` serves only its public half.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pylti1p3.exception import LtiException
from pylti1p3.registration import Registration
from pylti1p3.tool_config import ToolConfDict

from scalegrade.server.config import ConfigError, ServeConfig

KEY_FILE = "lti-private.pem"  # under the data folder, unless the JSON names another
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
HTTP_SECONDS = 20  # for each request to the LMS


class LtiConfigError(ConfigError):
    """A tool configuration that cannot be used: the file, the setting and the fix."""


class Refused(Exception):
    """A launch or login turned away: the HTTP status and a sentence for the person."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status, self.why = status, why


class PlatformEntry(BaseModel):
    """One registration of the tool in an LMS (what its admin page shows)."""

    model_config = ConfigDict(extra="forbid")

    client_id: str
    auth_login_url: str  # the LMS's OIDC authorization endpoint
    auth_token_url: str  # its OAuth2 token endpoint (for AGS)
    auth_audience: str | None = None  # the token's audience, if not auth_token_url
    key_set_url: str | None = None  # its JWKS
    key_set: dict | None = None  # or its JWKS itself
    deployment_ids: list[str] = Field(min_length=1)
    default: bool = False  # with several client ids: the one for a login without one

    @model_validator(mode="after")
    def _has_keys(self) -> PlatformEntry:
        if not (self.key_set_url or self.key_set):
            raise ValueError("key_set_url (the LMS's JWKS address) is missing")
        return self


class ToolFile(BaseModel):
    """The tool configuration file (JSON), as docs/platform.md describes it."""

    model_config = ConfigDict(extra="forbid")

    platforms: dict[str, PlatformEntry | list[PlatformEntry]] = Field(min_length=1)
    private_key_file: Path | None = None  # default: DATA/lti-private.pem, made if absent
    roster_id: list[str] = Field(["lis.person_sourcedid", "custom.roster_id"], min_length=1)
    score: Literal["latest", "best"] = "latest"
    state_cookie: Literal["if-sent", "required"] = "if-sent"


class ToolConf(ToolConfDict):
    """pylti1p3's dict configuration, its issuer kinds per instance (pylti1p3 keeps them
    on the class), an unknown issuer an :class:`LtiException` rather than a bare one."""

    def __init__(self, platforms: dict):
        self.issuers_relation_types = {}
        super().__init__(platforms)

    def get_iss_config(self, iss: str, client_id: str | None = None):
        if iss not in (self._config or {}):
            raise LtiException(f"the LMS {iss!r} is not registered in the tool configuration")
        try:
            return super().get_iss_config(iss, client_id)
        except LtiException:
            raise
        except Exception as err:  # pylti1p3 raises bare Exceptions for unknown clients
            raise LtiException(str(err)) from None


@dataclass
class Tool:
    """The tool's configuration, loaded: its registrations, its key pair, its options."""

    conf: ToolConf
    settings: ToolFile
    private_pem: str
    public_pem: str
    url: str  # the platform's public address
    secure: bool  # served over https: cookies Secure and SameSite=None

    @property
    def launch_url(self) -> str:
        return self.url + "/lti/launch"

    def jwks(self) -> dict:
        """The public key only, as the LMS fetches it."""
        return {"keys": [Registration.get_jwk(self.public_pem)]}

    def registration(self, iss: str, client_id: str) -> Registration:
        if self.conf.check_iss_has_one_client(iss):
            return self.conf.find_registration(iss)
        return self.conf.find_registration_by_params(iss, client_id)


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(x) for x in first["loc"])
    return f"setting {where!r}: {first['msg'].removeprefix('Value error, ')}"


def load_tool(config: ServeConfig) -> Tool:
    """The tool configuration ``config.lti`` names, with its private key (made under the
    data folder on first start when the file names none)."""
    path = Path(config.lti or "")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise LtiConfigError(f"{path}: cannot read the LTI tool configuration ({err})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LtiConfigError(f"{path}: not JSON ({err})") from None
    try:
        settings = ToolFile.model_validate(raw)
    except ValidationError as err:
        raise LtiConfigError(f"{path}: {_first_error(err)}") from None
    key_path = settings.private_key_file
    if key_path is not None and not key_path.is_absolute():
        key_path = path.resolve().parent / key_path
    private = private_key(key_path or config.data_dir / KEY_FILE, make=key_path is None)
    public = _public_pem(private)
    platforms = {
        iss: [e.model_dump(exclude_none=True) for e in entry]
        if isinstance(entry, list)
        else entry.model_dump(exclude_none=True)
        for iss, entry in settings.platforms.items()
    }
    conf = ToolConf(platforms)
    for iss, entry in settings.platforms.items():
        for one in entry if isinstance(entry, list) else [entry]:
            conf.set_private_key(iss, private, client_id=one.client_id)
            conf.set_public_key(iss, public, client_id=one.client_id)
    return Tool(conf, settings, private, public, config.url, config.cookies_secure)


def private_key(path: Path, make: bool) -> str:
    """The tool's RSA private key (PEM) at ``path``; made there (0600) when ``make`` and
    absent."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if make and not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            pass
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
    try:
        text = path.read_text(encoding="ascii")
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as err:
        raise LtiConfigError(
            f"{path}: not the tool's private key ({err}); name an unencrypted RSA key in "
            "PEM (private_key_file), or remove the setting to have one made"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise LtiConfigError(f"{path}: the tool's key must be RSA (LTI 1.3 signs with RS256)")
    return text


def _public_pem(private_pem: str) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def tool_of(app) -> Tool:
    """The application's tool configuration, loaded on first use (404 when the platform
    has none)."""
    tool = getattr(app.state, "lti_tool", None)
    if tool is None:
        config = app.state.platform.config
        if config.lti is None:
            raise Refused(404, "This platform takes no LTI launches: its serve.toml sets no "
                          "lti (docs/platform.md, LTI 1.3).")  # fmt: skip
        tool = app.state.lti_tool = load_tool(config)
    return tool
