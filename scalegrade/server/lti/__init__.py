"""LTI 1.3: ScaleGrade as a tool of the course's LMS (Canvas, Moodle, any LTI Advantage
platform), with pylti1p3 doing the protocol.

A launch is an OIDC login (the LMS sends the browser to ``/lti/login``; we send it back
with a state and a nonce) then a signed ``id_token`` posted to ``/lti/launch``; the routes
are :mod:`scalegrade.server.pages.lti`.  The modules, each importing only those above it:

- :mod:`.config`: the tool's configuration (its registrations in the LMSs, its key pair,
  its options) and the errors it and a refused launch raise;
- :mod:`.adapters`: pylti1p3 on Starlette: requests, cookies, redirects, the launch data
  kept in the database, and the launch checked more strictly than pylti1p3 does;
- :mod:`.passback`: scores back to the LMS (AGS): where each student's score goes, and
  the thread that posts each change;
- :mod:`.identity`: who a launch is (their account and role) and which assignment its
  link names.

Callers import from the submodules; this package re-exports nothing.
"""
