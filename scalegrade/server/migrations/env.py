"""Alembic's environment for the platform's tables (:mod:`scalegrade.server.store`): run
on the connection the platform opened, with a version table of their own."""

from alembic import context

from scalegrade.server.store import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, render_as_batch=True, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
