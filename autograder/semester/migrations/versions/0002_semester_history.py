"""The semester: every graded attempt, assignments' deadlines and policy, extensions,
marks given by people, an audit log of changes; the current result gains its submission
time and late penalty.

Each existing result becomes its student's first attempt (its harvest, key and checks
hashes were not kept then: left empty), so nothing graded before is lost.

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
        "assignments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("course", sa.String(200), nullable=False),
        sa.Column("title", sa.String(400), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("due", sa.String(40), nullable=True),
        sa.Column("due_override", sa.String(40), nullable=True),
        sa.Column("policy_json", sa.Text, nullable=False),
        sa.Column("policy_override_json", sa.Text, nullable=True),
        sa.Column("max_score", sa.Float, nullable=False),
        sa.Column("keys_dir", sa.Text, nullable=True),
        sa.Column("out_dir", sa.Text, nullable=True),
        sa.Column("reveal", sa.Boolean, nullable=True),
        sa.Column("recorded_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("notebook", sa.Text, nullable=True),
        sa.Column("submitted_at", sa.String(40), nullable=True),
        sa.Column("time_source", sa.String(200), nullable=False),
        sa.Column("time_warning", sa.Text, nullable=True),
        sa.Column("graded_at", sa.String(40), nullable=False),
        sa.Column("key_sha256", sa.String(64), nullable=True),
        sa.Column("checks_json", sa.Text, nullable=True),
        sa.Column("policy_json", sa.Text, nullable=True),
        sa.Column("harvest_json", sa.Text, nullable=True),
        sa.Column("result_json", sa.Text, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("attempts_by_student", "attempts", ["assignment", "student_id"])
    op.create_table(
        "extensions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("due", sa.String(40), nullable=True),
        sa.Column("extra_days", sa.Float, nullable=True),
        sa.Column("granted_by", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("granted_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "marks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("student_id", sa.String(200), nullable=False),
        sa.Column("question", sa.String(200), nullable=False),
        sa.Column("part", sa.String(200), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("marker", sa.String(200), nullable=False),
        sa.Column("answer_sha256", sa.String(64), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("marked_at", sa.String(40), nullable=False),
    )
    op.create_index("marks_by_student", "marks", ["assignment", "student_id"])
    op.create_table(
        "changes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("assignment", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("detail_json", sa.Text, nullable=False),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("at", sa.String(40), nullable=False),
    )
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("attempt_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("submitted_at", sa.String(40), nullable=True))
        batch.add_column(sa.Column("earned", sa.Float, nullable=True))
        batch.add_column(sa.Column("late_penalty", sa.Float, nullable=False, server_default="0"))

    # every result graded before becomes its student's first attempt
    submissions = sa.table(
        "submissions",
        sa.column("id", sa.Integer),
        sa.column("assignment", sa.String),
        sa.column("student_id", sa.String),
        sa.column("content_hash", sa.String),
        sa.column("score", sa.Float),
        sa.column("error", sa.Text),
        sa.column("graded_at", sa.String),
        sa.column("result_json", sa.Text),
        sa.column("attempt_id", sa.Integer),
        sa.column("earned", sa.Float),
    )
    attempts = sa.table(
        "attempts",
        sa.column("id", sa.Integer),
        sa.column("assignment", sa.String),
        sa.column("student_id", sa.String),
        sa.column("content_hash", sa.String),
        sa.column("time_source", sa.String),
        sa.column("graded_at", sa.String),
        sa.column("result_json", sa.Text),
        sa.column("score", sa.Float),
        sa.column("error", sa.Text),
    )
    bind = op.get_bind()
    for row in bind.execute(sa.select(submissions)).mappings().all():
        attempt = bind.execute(
            attempts.insert()
            .values(
                assignment=row["assignment"],
                student_id=row["student_id"],
                content_hash=row["content_hash"],
                time_source="unknown (graded before submission times were kept)",
                graded_at=row["graded_at"],
                result_json=row["result_json"],
                score=row["score"],
                error=row["error"],
            )
            .returning(attempts.c.id)
        ).scalar_one()
        bind.execute(
            submissions.update()
            .where(submissions.c.id == row["id"])
            .values(attempt_id=attempt, earned=row["score"])
        )


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        for name in ("late_penalty", "earned", "submitted_at", "attempt_id"):
            batch.drop_column(name)
    for table in ("changes", "marks", "extensions", "attempts", "assignments"):
        op.drop_table(table)
