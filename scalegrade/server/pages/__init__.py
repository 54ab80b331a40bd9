"""The pages, one module per role: every route of the platform is listed here.

- :mod:`.auth`: sign in and out, and the start page of each role;
- :mod:`.student`: a student's assignments, notebook, uploads, verdicts and history.
"""

from scalegrade.server.pages import auth, student

ROUTES = [*auth.ROUTES, *student.ROUTES]
