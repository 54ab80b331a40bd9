"""The course secret: variants are HMAC(secret, course/assignment/question/student).

Whoever holds the secret can recompute every student's numbers, so it never lives in the
repository or the bank: ``--secret-file FILE`` or ``$SCALEGRADE_SECRET``.
"""

from __future__ import annotations

import os
from pathlib import Path

SECRET_ENV = "SCALEGRADE_SECRET"
# Used by `scalegrade demo` only; `scalegrade generate` refuses it.
DEMO_SECRET = b"scalegrade-demo-secret-do-not-use-for-a-real-course"


class SecretError(RuntimeError):
    """No usable course secret."""


def load_secret(secret_file: Path | None = None) -> bytes:
    """The course secret: ``--secret-file`` if given, else ``$SCALEGRADE_SECRET``.

    Variants are HMAC(secret, course/assignment/question/student): whoever holds the
    secret can recompute every student's numbers, so keep it out of the repository.
    """
    if secret_file is not None:
        try:
            secret = secret_file.read_bytes().strip()
        except OSError as err:
            raise SecretError(
                f"{secret_file}: cannot read the secret file ({err.strerror})"
            ) from None
        where = str(secret_file)
    else:
        secret = os.environ.get(SECRET_ENV, "").strip().encode()
        where = f"${SECRET_ENV}"
        if not secret:
            raise SecretError(
                f"no course secret: set ${SECRET_ENV} or pass --secret-file FILE "
                "(e.g. `python -c 'import secrets; print(secrets.token_hex(32))' > secret.txt`)"
            )
    if len(secret) < 16:
        raise SecretError(f"{where}: the secret is {len(secret)} bytes; use at least 16")
    if secret == DEMO_SECRET:
        raise SecretError(f"{where}: this is the public demo secret; generate a course secret")
    return secret
