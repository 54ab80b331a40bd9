"""The platform's first tables: accounts (roles, passwords, LTI identities) and the
grading queue.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("login", sa.String(200), nullable=False, unique=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("name", sa.String(400), nullable=False),
        sa.Column("password", sa.Text, nullable=True),
        sa.Column("lti_issuer", sa.String(400), nullable=True),
        sa.Column("lti_subject", sa.String(400), nullable=True),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_index("accounts_by_lti", "accounts", ["lti_issuer", "lti_subject"], unique=True)
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("upload", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("submitted_at", sa.String(40), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("tries", sa.Integer, nullable=False),
        sa.Column("worker", sa.String(200), nullable=True),
        sa.Column("lease_until", sa.Float, nullable=True),
        sa.Column("started_at", sa.String(40), nullable=True),
        sa.Column("finished_at", sa.String(40), nullable=True),
        sa.Column("attempt_id", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("jobs_by_state", "jobs", ["state", "id"])
    op.create_index("jobs_by_student", "jobs", ["assignment", "student_id"])


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_table("accounts")
