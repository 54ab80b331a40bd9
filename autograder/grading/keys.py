"""A released ``keys/`` folder, loaded for grading: all that grading reads.

The release (policy, roster, due date), each student's key, and the code checks release
wrote beside them, each verified against its SHA-256 and compiled once.  Nothing here
reads the question bank: a ``checks.py`` edited after release changes no grade until the
assignment is re-keyed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import contract
from autograder.grading.checks import Checks, ChecksError
from autograder.sandbox import Plan, Probe
from contract import Key, KeyFileError, Ledger, Release


def probe_seed(question_seed: str, part_id: str) -> int:
    """The grading seed of a code part: fixed by the variant, so grading is reproducible."""
    digest = hashlib.sha256(f"{question_seed}:{part_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class Keys:
    """``keys/``: the release now, the released checks now (verified), keys when asked."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.release: Release = contract.read_release(self.folder)
        self.checks: dict[str, Checks] = {}
        for file, digest in sorted(self.release.checks.items()):
            ref = contract.Checks(file=file, sha256=digest)
            source = contract.read_checks(self.folder, ref)
            try:
                self.checks[file] = Checks.from_source(source, str(self.folder / file))
            except ChecksError as err:
                raise KeyFileError(str(err)) from None
        self.ledger: Ledger = contract.read_ledger(self.folder)
        self._keys: dict[tuple[str, int | None], Key] = {}

    @property
    def preload(self) -> tuple[str, ...]:
        """What every released check needs imported: the sandbox imports it as it starts."""
        return tuple(dict.fromkeys(m for c in self.checks.values() for m in c.preload))

    def __contains__(self, student_id: str) -> bool:
        return student_id in self.release.students

    def key(self, student_id: str, version: int | None = None) -> Key:
        """The key of one student of the roster (read once): of their latest variant, or
        of an earlier ``version`` (the seed ledger's: their number of reseeds)."""
        if version == self.ledger.version(student_id):
            version = None
        if (student_id, version) not in self._keys:
            if student_id not in self:
                raise KeyFileError(f"{self.folder}: no key for student {student_id!r}")
            name = (
                f"{student_id}.json"
                if version is None
                else contract.reseeded_key_file(student_id, version)
            )
            key = contract.read_key(self.folder / name)
            self._verified(key)
            self._keys[(student_id, version)] = key
        return self._keys[(student_id, version)]

    def key_at(self, student_id: str, at: datetime | None) -> tuple[Key, int]:
        """The key a submission made at ``at`` is graded with, and its variant version:
        the version the ledger says was current then (None: the latest)."""
        version = self.ledger.version_at(student_id, at)
        return self.key(student_id, version), version

    @staticmethod
    def digest(key: Key) -> str:
        """The SHA-256 of a key file (what an attempt was graded by)."""
        return contract.sha256(key.to_json())

    def checks_used(self, key: Key) -> dict[str, str]:
        """The checks a key's code parts are graded with: file under keys/ -> SHA-256."""
        return {c.checks.file: c.checks.sha256 for q in key.questions for c in q.code if c.checks}

    def all(self) -> dict[str, Key]:
        """Every student's key, by student id."""
        return {sid: self.key(sid) for sid in self.release.students}

    def _verified(self, key: Key) -> None:
        where = self.folder / f"{key.student.id}.json"
        if key.assignment != self.release.assignment:
            raise KeyFileError(
                f"{where}: a key of {key.assignment}, in the keys of {self.release.assignment}"
            )
        for q in key.questions:
            for c in q.code:
                if (
                    c.checks is not None
                    and self.release.checks.get(c.checks.file) != c.checks.sha256
                ):
                    raise KeyFileError(
                        f"{where}: {q.id} part {c.id} names checks {c.checks.file} that "
                        f"{contract.RELEASE_FILE} does not list with that SHA-256; re-key"
                    )

    def plan(self, key: Key) -> Plan:
        """What the sandbox must read and probe for this student's key."""
        variables = tuple(a.variable for q in key.questions for a in q.answers if a.ask)
        probes = tuple(
            Probe(
                id=f"q{q.index}-{c.id}",
                function=c.function,
                source=self.checks[c.checks.file].source,
                seed=probe_seed(q.seed, c.id),
                params=q.params,
                isolated=self.checks[c.checks.file].isolated,
                preload=self.checks[c.checks.file].preload,
            )
            for q in key.questions
            for c in q.code
            if c.checks is not None
        )
        return Plan(variables=variables, probes=probes)
