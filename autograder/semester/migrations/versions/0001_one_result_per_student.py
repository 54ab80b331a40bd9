"""The first gradebook: one result per (assignment, student) and its part grades.

This is the schema ScaleGrade wrote before migrations (up to commit 0497d62), with
``Base.metadata.create_all``; a gradebook of that time has no ``alembic_version`` table
and is stamped at this revision before it is upgraded.

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
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("max_score", sa.Float, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("graded_at", sa.String(40), nullable=False),
        sa.Column("result_json", sa.Text, nullable=False),
        sa.UniqueConstraint("assignment", "student_id"),
    )
    op.create_table(
        "part_grades",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("question", sa.String(200), nullable=False),
        sa.Column("part", sa.String(200), nullable=False),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("score", sa.Float, nullable=True),
        sa.Column("points", sa.Float, nullable=False),
        sa.Column("misconception", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("part_grades")
    op.drop_table("submissions")
