"""`scalegrade serve`: a released course as a running platform.

Students sign in (a password, or an LTI 1.3 launch from the LMS), download their own
notebook, upload a submission and get its verdict in about a second; TAs mark the parts a
person grades; instructors watch the gradebook and change deadlines, extensions and keys
with the CLI's own functions.  Layers, each importing only those below it:

- :mod:`.config`: the settings (a TOML file, the environment, the command);
- :mod:`.store`: the platform's tables (accounts, jobs) beside the gradebook's, with
  their own migrations;
- :mod:`.course`: the released assignments of the course folder;
- :mod:`.queue`: the durable grading queue; :mod:`.worker`: the processes that drain it,
  each with one warm sandbox;
- :mod:`.security`: passwords, sessions, CSRF, roles and upload limits;
- :mod:`.platform`: what every page reads (settings, gradebook, queue, course, templates);
- :mod:`.pages` and :mod:`.app`: the pages per role, and the ASGI application that
  mounts them (Starlette, Jinja2 templates, vendored htmx, no JavaScript build);
- :mod:`.lti`: the LTI 1.3 tool: launches from Canvas or Moodle, scores posted back;
- :mod:`.run`: the process that serves it with uvicorn and supervises the workers.
"""
