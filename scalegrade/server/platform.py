"""What every page needs: the platform's parts (settings, gradebook, queue, course,
templates), kept on the application by :func:`scalegrade.server.app.create_app` and read
by the pages (:mod:`.pages`) with :func:`platform`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.templating import Jinja2Templates

from autograder.semester.gradebook import Gradebook
from scalegrade.server.config import ServeConfig
from scalegrade.server.course import Course
from scalegrade.server.queue import Queue

HERE = Path(__file__).resolve().parent


@dataclass
class Platform:
    """What every page needs, on ``request.app.state.platform``."""

    config: ServeConfig
    book: Gradebook
    queue: Queue
    course: Course
    templates: Jinja2Templates


def platform(request: Request) -> Platform:
    return request.app.state.platform


def templates() -> Jinja2Templates:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return Jinja2Templates(env=env)
