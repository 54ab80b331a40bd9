"""The pages, one module per role: every route of the platform is listed here.

- :mod:`.auth`: sign in and out, and the start page of each role;
- :mod:`.student`: a student's assignments, notebook, uploads, verdicts and history;
- :mod:`.marking`: the parts a person grades, marked one at a time (TAs, instructors);
- :mod:`.instructor`: the live gradebook, item analysis, LMS exports, and extensions,
  deadlines, rekey, regrade and reseed (instructors);
- :mod:`.lti`: LTI 1.3 launches from the LMS (OIDC login, launch, the tool's keys).
"""

from scalegrade.server.pages import auth, instructor, lti, marking, student

ROUTES = [*auth.ROUTES, *student.ROUTES, *marking.ROUTES, *instructor.ROUTES, *lti.ROUTES]
