"""What `scalegrade serve` runs with: a TOML file, then the environment, then the command.

Every setting has an embedded default, so ``scalegrade serve --course DIR`` needs nothing
else: the platform's data (the gradebook, uploads, the session key) under ``DIR/server``,
SQLite, two workers each with a warm local sandbox, on http://127.0.0.1:8000.

The file is ``DIR/serve.toml`` when it exists, or ``--config FILE``; each setting may be
overridden by ``SCALEGRADE_SERVE_<NAME>`` (``SCALEGRADE_SERVE_DB=postgresql+psycopg://...``)
and then by the command's options.  docs/platform.md lists them.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_PREFIX = "SCALEGRADE_SERVE_"
CONFIG_FILE = "serve.toml"


class ConfigError(ValueError):
    """A configuration that cannot be served: the file (or variable) and the setting."""


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    course: Path  # released assignments: DIR/<name>/keys/assignment.json, DIR/<name>/release/
    data: Path | None = None  # default: COURSE/server
    db: str | None = None  # gradebook URL; default: sqlite in DATA
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    public_url: str | None = None  # what the LMS and the links use; default http://HOST:PORT
    workers: int = Field(2, ge=0, le=64)  # sandboxes at most; 0: grade elsewhere (`serve work`)
    sandbox: str = "auto"  # auto | namespaces | process | docker
    executor: str = "local"  # local | dask: where the workers' sandboxes run
    scheduler: str | None = None  # the Dask scheduler, for executor = "dask"
    image: str | None = None
    timeout: float = Field(120.0, gt=0)  # wall seconds per submission
    lease_seconds: float = Field(30.0, ge=1)  # a dead worker's job is graded again after it
    upload_max_bytes: int = Field(8 * 2**20, ge=1024)
    uploads_per_minute: int = Field(6, ge=1)  # per student
    secure_cookies: bool | None = None  # None: when public_url is https
    lti: Path | None = None  # the LTI 1.3 tool configuration (docs/platform.md)
    bank: Path | None = None  # the question bank rekey and reseed use; default: ScaleGrade's own
    secret_file: Path | None = None  # the course secret; default: $SCALEGRADE_SECRET

    @field_validator("sandbox")
    @classmethod
    def _known_sandbox(cls, v: str) -> str:
        if v not in ("auto", "namespaces", "process", "docker"):
            raise ValueError("one of auto, namespaces, process, docker")
        return v

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, v: str) -> str:
        if v not in ("local", "dask"):
            raise ValueError("one of local, dask")
        return v

    @model_validator(mode="after")
    def _dask_needs_a_scheduler(self) -> ServeConfig:
        if (self.executor == "dask") != bool(self.scheduler):
            raise ValueError('executor = "dask" and scheduler = "tcp://HOST:8786" go together')
        return self

    @property
    def data_dir(self) -> Path:
        return (self.data or self.course / "server").resolve()

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir / 'gradebook.sqlite'}"

    @property
    def url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @property
    def cookies_secure(self) -> bool:
        if self.secure_cookies is None:
            return self.url.startswith("https://")
        return self.secure_cookies


def load(course: Path | None, file: Path | None = None, **given) -> ServeConfig:
    """The configuration: ``file`` (else COURSE/serve.toml if there), the environment, and
    ``given`` (the command's options; None: not given)."""
    settings: dict = {}
    source: dict[str, str] = {}  # setting -> where it was set
    if file is None and course is not None and (Path(course) / CONFIG_FILE).is_file():
        file = Path(course) / CONFIG_FILE
    if file is not None:
        try:
            settings = tomllib.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{file}: cannot read ({err})") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{file}: not TOML: {err}") from None
        source = dict.fromkeys(settings, str(file))
        base = Path(file).resolve().parent
        for name in ("course", "data", "lti", "bank", "secret_file"):  # relative to the file
            if isinstance(settings.get(name), str):
                settings[name] = base / settings[name]
    for name in ServeConfig.model_fields:
        value = os.environ.get(ENV_PREFIX + name.upper())
        if value is not None:
            settings[name] = value
            source[name] = f"${ENV_PREFIX}{name.upper()}"
    for name, value in given.items():
        if value is not None:
            settings[name] = value
            source[name] = f"--{name.replace('_', '-')}"
    if course is not None:
        settings["course"] = course
    if "course" not in settings:
        raise ConfigError("name the course: --course DIR (the folder of released assignments)")
    try:
        return ServeConfig.model_validate(settings)
    except ValidationError as err:
        first = err.errors()[0]
        name = ".".join(str(x) for x in first["loc"])
        where = source.get(name, str(file) if file else "the settings")
        message = first["msg"].removeprefix("Value error, ")
        if not name:
            raise ConfigError(f"{where}: {message}") from None
        raise ConfigError(f"{where}: setting {name!r}: {message}") from None
