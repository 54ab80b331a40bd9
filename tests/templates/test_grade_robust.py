"""grade() of every code part of the bank survives any shape of result (issue 36, item 7).

A student's value reaches ``grade`` as plain data recorded by the probe: whatever shape the
student returned (a 2-D array where a vector was asked, an empty list, None, strings, NaN,
numbers beyond float64).  ``grade`` runs in the trusted grader, and a ``grade`` that raises
drops the whole part ("Not graded", 0) instead of failing the property the value breaks,
which takes the credit of the other properties with it.

For every code part with a checks file (found from the ``code:`` list of each
``templates/*/*/question.yaml``), this runs the marked reference through the part's probe
once, as :func:`autograder.grading.checks.run_locally` does (behind
:func:`autograder.grading.checks.local_student`, then through JSON), and feeds ``grade`` mutated
copies of that honest result: each array or list replaced by a deeper nested list, an empty
list, None, a string, a list of strings, its first half, or all but its first element (a
shape [1, H, W] read as [H, W]); one element of a numeric array, and each number outside
one, replaced by "nan", an int beyond int64, an int beyond float64, a negative value or
None; each entry of a dict removed.  ``grade`` must not raise, nor take more than a few seconds, and
must return the honest result's properties, same names and weights, with scores in [0, 1]
(:func:`autograder.grading.checks.properties`): a malformed value fails a property, never the part.

The mutations are grouped by kind and by place (the path with list indices left out, so
the hundred records of a list count as one place): each group is tried once at one of its
paths, once at all of them, and once at every place that ends in the same key (every
"shape" of the result: a student's function returns the same wrong shape from every call),
sampled deterministically per part if there are more than :data:`CAP`.
"""

from __future__ import annotations

import json
import random
import signal
import traceback
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import yaml

from autograder.grading.checks import (
    ChecksError,
    fraction,
    load_checks,
    probe_locally,
    properties,
    run_locally,
)
from tests.templates.codecheck import TEMPLATES, function

SEED = 5  # one grading seed: the mutations, not the seeds, are what this varies
CAP = 800  # mutated results graded per code part (the bank's largest has about 320)
SECONDS = 10  # one grade() call; more is a grader a student's value can stall

HUGE = 10**30  # beyond int64: np.asarray(..., int64) and C long conversions overflow
VAST = 10**400  # beyond float64: float() overflows
NUMERIC_KINDS = ("nan", "huge", "vast", "negative", "none")


def code_parts() -> list:
    """(folder, code part) of every code part of the bank with a checks file."""
    out = []
    for spec in sorted(TEMPLATES.glob("*/*/question.yaml")):
        for part in yaml.safe_load(spec.read_text(encoding="utf-8")).get("code") or []:
            if part.get("checks"):
                qid = spec.parent.relative_to(TEMPLATES).as_posix()
                out.append(pytest.param(spec.parent, part, id=f"{qid}:{part['id']}"))
    return out


PARTS = code_parts()


@cache
def honest(folder: Path, solution: str, checks_file: str, name: str):
    """The probe's result for the reference, as it comes out of the sandbox (JSON)."""
    checks = load_checks(folder, checks_file)
    return probe_locally(checks, function(folder, solution, name), SEED, {})


# --- mutations -----------------------------------------------------------------------------


def _number(x) -> bool:
    return type(x) in (int, float) or (isinstance(x, str) and x in ("nan", "inf", "-inf"))


def _numeric(x) -> bool:
    """A list of numbers, or of such lists: an array as a probe records it."""
    return (
        isinstance(x, list)
        and bool(x)
        and (all(_number(v) for v in x) or all(_numeric(v) for v in x))
    )


def _first_leaf(x: list) -> list[int]:
    path = []
    while isinstance(x, list):
        path.append(0)
        x = x[0]
    return path


def _scalar_mutations(x) -> Iterator[tuple[str, object]]:
    yield "nan", "nan"
    yield "huge", HUGE
    yield "vast", VAST
    yield "negative", -abs(float(x) if not isinstance(x, str) else 1.0) - 1.0
    yield "none", None


def mutations(tree) -> Iterator[tuple[str, tuple, object]]:
    """(kind, path, replacement) for every place of ``tree`` (a path of keys and indices)."""

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                yield "removed", (*path, k), _REMOVE
                yield from walk(v, (*path, k))
        elif isinstance(x, list):
            yield "nested", path, [x, x]
            yield "empty", path, []
            yield "none", path, None
            yield "string", path, "not an array"
            yield "strings", path, ["x"] * max(1, len(x))
            if len(x) > 1:
                yield "truncated", path, x[: len(x) // 2]
                yield "headless", path, x[1:]  # a shape [1, H, W] read as [H, W]
            if _numeric(x):
                leaf = _first_leaf(x)
                value = x
                for i in leaf:
                    value = value[i]
                for kind, new in _scalar_mutations(value):
                    yield f"element-{kind}", (*path, *leaf), new
            else:
                for i, v in enumerate(x):
                    yield from walk(v, (*path, i))
        elif type(x) in (int, float):
            for kind, new in _scalar_mutations(x):
                yield kind, path, new

    yield from walk(tree, ())


_REMOVE = object()


def replaced(tree, path: tuple, new):
    """``tree`` with the value at ``path`` replaced by ``new`` (removed: :data:`_REMOVE`);
    the other branches shared (the result goes through JSON before grade sees it)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(tree, dict):
        out = dict(tree)
        if not rest and new is _REMOVE:
            del out[head]
        else:
            out[head] = replaced(tree[head], rest, new)
        return out
    out = list(tree)
    out[head] = replaced(tree[head], rest, new)
    return out


def sample(tree, key: str) -> list[tuple[str, list[tuple], object]]:
    """(kind, paths, replacement): per (kind, place), the mutation at one of the place's
    paths and, where the place has several (the records of a list), at all of them at once;
    per (kind, last key), at every place that ends in that key (every "shape" of the
    result: a student's function returns the same wrong shape from every call).  At most
    :data:`CAP`, taken kind by kind in a seeded order, so that every kind is tried."""
    rng = random.Random(f"grade-robust:{key}")
    groups: dict[tuple, list] = {}
    for kind, path, new in mutations(tree):
        place = tuple("[]" if isinstance(p, int) else p for p in path)
        groups.setdefault((kind, place), []).append((path, new))
    by_name: dict[tuple, list] = {}  # every place ending in the same key: all "shape"s
    for (kind, place), members in groups.items():
        keys = [i for i, p in enumerate(place) if isinstance(p, str)]
        name = place[keys[-1] :] if keys else place
        if kind != "removed" or len(name) == 1:
            by_name.setdefault((kind, name), []).extend(p for p, _ in members)
    by_kind: dict[str, list] = {}
    seen: set = set()
    for (kind, _), members in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        path, new = rng.choice(members)
        by_kind.setdefault(kind, []).append((kind, [path], new))
        if len(members) > 1:
            everywhere = [p for p, _ in members]
            seen.add((kind, tuple(everywhere)))
            by_kind.setdefault(f"{kind} everywhere", []).append((kind, everywhere, new))
    for (kind, _), paths in sorted(by_name.items(), key=lambda kv: repr(kv[0])):
        if len(paths) > 1 and (kind, tuple(paths)) not in seen:
            new = next(n for k, p, n in mutations(tree) if k == kind and p == paths[0])
            by_kind.setdefault(f"{kind} by name", []).append((kind, paths, new))
    for members in by_kind.values():
        rng.shuffle(members)
    chosen: list = []
    while len(chosen) < CAP and any(by_kind.values()):
        for kind in sorted(by_kind):
            if by_kind[kind] and len(chosen) < CAP:
                chosen.append(by_kind[kind].pop())
    return chosen


def replaced_all(tree, paths: list[tuple], new):
    """``tree`` with the value at each of ``paths`` replaced; a path inside another one
    replaced goes with it."""
    done: list[tuple] = []
    for path in sorted(paths, key=len):
        if not any(path[: len(d)] == d for d in done):
            tree = replaced(tree, path, new)
            done.append(path)
    return tree


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow(f"grade() ran more than {SECONDS} s")


def test_the_mutations_cover_every_kind():
    tree = {"a": [1.0, 2.0], "b": {"c": 3, "d": [{"e": [[1, 2], [3, 4]]}]}}
    kinds = {kind for kind, _, _ in mutations(tree)}
    assert kinds == {
        "removed",
        "nested",
        "empty",
        "none",
        "string",
        "strings",
        "truncated",
        "headless",
        *NUMERIC_KINDS,
        *(f"element-{k}" for k in NUMERIC_KINDS),
    }
    assert replaced(tree, ("b", "d", 0, "e", 1, 0), "nan")["b"]["d"][0]["e"] == [[1, 2], ["nan", 4]]
    assert "c" not in replaced(tree, ("b", "c"), _REMOVE)["b"] and tree["b"]["c"] == 3


def test_every_code_part_is_found():
    assert len(PARTS) >= 17 and any("circular-conv-code" in p.id for p in PARTS)


@pytest.mark.parametrize(("folder", "part"), PARTS)
def test_grade_fails_a_property_never_the_part(folder, part):
    checks = load_checks(folder, part["checks"])
    result = honest(folder, part["solution"], part["checks"], part["function"])
    props = properties(checks.grade(json.loads(json.dumps(result)), SEED, {}))
    assert fraction(props) == pytest.approx(1.0), "the reference must score full marks"
    same = [(x["name"], x["weight"]) for x in props]  # a bad value fails one, drops none
    failures = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for kind, paths, new in sample(result, f"{folder.name}:{part['id']}"):
            mutated = json.loads(json.dumps(replaced_all(result, paths, new)))
            shown = "/".join(map(str, paths[0])) or "(root)"
            where = f"{kind} at {shown}" + (f" and {len(paths) - 1} more" if paths[1:] else "")
            signal.setitimer(signal.ITIMER_REAL, SECONDS)
            try:
                got = properties(checks.grade(mutated, SEED, {}), where)
                if [(x["name"], x["weight"]) for x in got] != same:
                    failures.append(f"{where}: properties {[x['name'] for x in got]} differ")
            except ChecksError as err:
                failures.append(str(err))
            except Exception as err:  # noqa: BLE001 - every crash is a finding
                last = traceback.extract_tb(err.__traceback__)[-1]
                failures.append(
                    f"{where}: {type(err).__name__}: {str(err)[:200]} "
                    f"({Path(last.filename).name}:{last.lineno})"
                )
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not failures, f"{len(failures)} malformed results crash grade():\n" + "\n".join(
        failures[:40]
    )


def test_a_two_dimensional_convolution_output_fails_the_shape_properties_only():
    """The reported case (vision/circular-conv-code): a layer that returns (H, W) for one
    channel instead of (1, H, W) made grade() raise AxisError, so the part showed "Not
    graded" and 0.  Its outputs still commute with torch.roll on the image's axes, and its
    two-channel output is right: the two shape properties fail, the other three count."""
    folder = TEMPLATES / "vision" / "circular-conv-code"
    reference = function(folder, "solution.py", "circular_conv2d")

    def circular_conv2d(x, w, stride=1):
        return reference(x, w, stride).squeeze(0)  # (H, W) when c_out = 1

    props = run_locally(folder / "checks.py", circular_conv2d, SEED)
    assert [p["score"] for p in props] == [0.0, 1.0, 1.0, 0.0, 1.0], props
    assert "expected (c_out, H', W') = [1, " in props[0]["message"]
    assert fraction(props) == pytest.approx(5 / 8)

    def flat(x, w, stride=1):
        return reference(x, w, stride).reshape(-1)

    props = run_locally(folder / "checks.py", flat, SEED)
    assert fraction(props) == 0
    assert "your layer returned an array of shape (" in props[2]["message"]
