"""Alembic's environment for the gradebook: run on the connection the gradebook opened.

:meth:`autograder.semester.gradebook.Gradebook.migrate` runs the migrations in ``versions/`` on
its own connection; there is no alembic.ini and no URL here.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
