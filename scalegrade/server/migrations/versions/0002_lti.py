"""LTI 1.3: where each student's score goes back in the LMS and what was sent there
(``lti_links``), and the one-time values of launches (``lti_launch_data``).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_links",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("issuer", sa.String(400), nullable=False),
        sa.Column("client_id", sa.String(400), nullable=False),
        sa.Column("lti_user", sa.String(400), nullable=False),
        sa.Column("lineitem", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("launched_at", sa.String(40), nullable=False),
        sa.Column("best_score", sa.Float, nullable=True),
        sa.Column("best_max", sa.Float, nullable=True),
        sa.Column("best_progress", sa.String(20), nullable=True),
        sa.Column("posted_score", sa.Float, nullable=True),
        sa.Column("posted_max", sa.Float, nullable=True),
        sa.Column("posted_progress", sa.String(20), nullable=True),
        sa.Column("posted_at", sa.String(40), nullable=True),
        sa.Column("tries", sa.Integer, nullable=False),
        sa.Column("retry_at", sa.Float, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("lti_links_by_student", "lti_links", ["assignment", "student_id"], unique=True)
    op.create_table(
        "lti_launch_data",
        sa.Column("name", sa.String(400), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("lti_launch_data_by_expiry", "lti_launch_data", ["expires_at"])


def downgrade() -> None:
    op.drop_table("lti_launch_data")
    op.drop_table("lti_links")
