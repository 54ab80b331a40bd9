"""A course over a term: batches of submissions (``batch``) and their regrades
(``regrade``), the gradebook on SQLAlchemy with its alembic ``migrations``, submission
times, extensions and late policies (``submitted_at``, ``lateness``), TAs' marks
(``marks``), standings (``standing``), and the files a batch writes (``outputs``, with the
LMS grade sheets of ``lms``)."""
