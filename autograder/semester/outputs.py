"""What grading produces: Gradescope results.json, feedback pages, CSVs, the instructor report.

Everything here works on result documents (``dataclasses.asdict`` of a
:class:`~autograder.grading.grade.StudentResult`, as the gradebook stores them), so a resumed
batch reports on every student graded so far.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections import Counter, defaultdict
from typing import Any

from autograder.analysis import plots

Result = dict[str, Any]
_SEED = re.compile(r" \(seed \d+\)")

# --- Gradescope ----------------------------------------------------------------------


def gradescope(result: Result, *, reveal: bool) -> dict[str, Any]:
    """results.json per the Gradescope autograder specification.

    Top-level ``score``, ``max_score``, ``output``; one test per part with ``name``,
    ``score``, ``max_score``, ``output`` and ``visibility``.  Parts a person grades are
    left out of the score and listed as pending.  Expected values appear only when the
    policy reveals them (``reveal``), and the worked solutions only then.
    """
    tests = []
    for g in result["parts"]:
        v = g["verdict"]
        name = f"Q{g['index']} {v['variable'] or v['part']}"
        lines = [v["feedback"]]
        if v["given"]:
            lines.insert(0, f"Your answer: {v['given']}.")
        if reveal and v["expected"]:
            lines.append(f"Expected: {v['expected']}.")
        test = {
            "name": name,
            "max_score": v["points"],
            "output": " ".join(lines),
            "visibility": "visible",
        }
        if v["score"] is not None:
            test["score"] = round(v["score"], 4)
        elif v["status"] == "pending" and v["variable"]:  # a code part whose check failed
            test["output"] = v["feedback"]
        else:
            test["output"] = "Pending: graded by a person."
        tests.append(test)
    output = [
        f"{result['score']:g} / {result['max_score']:g} points (parts graded by a person "
        "are pending)."
    ]
    output += late_lines(result)
    if result.get("released_to"):
        output.append(identity_note(result))
    if result["error"]:
        output.append(f"Your notebook could not be run: {result['error']}.")
    output += [f"Error in {e}" for e in result["cell_errors"]]
    return {
        "score": round(result["score"], 4),
        "max_score": result["max_score"],
        "output": "\n".join(output),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def late_lines(result: Result) -> list[str]:
    """What a student is told of their submission time: the extension, then the late note."""
    late = result.get("late")
    if not late:
        return []
    return [x for x in (late["extension"], late["note"]) if x]


def identity_note(result: Result) -> str:
    """What a student is told when the notebook was released to someone else."""
    return (
        f"This notebook was released to another student ({result['released_to']}); it was "
        "graded with your own numbers, which are in the notebook released to you."
    )


# --- feedback page -------------------------------------------------------------------

STYLE = """body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;color:#111;
line-height:1.45}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;
padding:.35rem .5rem;text-align:left;vertical-align:top}.correct{color:#146c2e}
.carried{color:#8a5a00}.misconception,.wrong,.wrong_unit,.missing,.unreadable{color:#a1131b}.pending{color:#555}
.late{color:#8a5a00}
.score{font-size:1.4rem}.solution{background:#f6f6f6;padding:.5rem 1rem;margin:.5rem 0}"""


def feedback_html(result: Result, *, title: str, solutions: dict[str, str] | None) -> str:
    """One student's page: per part the score, their value, the feedback; solutions by policy.

    ``solutions`` maps a question to its worked solution as HTML, rendered by the generator
    from the instructor's answer graph (trusted content; student text is always escaped).
    """
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style><h1>{html.escape(title)}</h1>"
        + feedback_body(result, solutions=solutions)
        + "</html>\n"
    )


def feedback_body(result: Result, *, solutions: dict[str, str] | None) -> str:
    """The feedback itself, without its page: the score, the run's problems, and the table
    of parts (what :func:`feedback_html` and the platform's feedback page both show)."""
    rows = []
    by_question: dict[int, list] = defaultdict(list)
    for g in result["parts"]:
        by_question[g["index"]].append(g)
    for index in sorted(by_question):
        parts = by_question[index]
        rows.append(
            f"<tr><th colspan=4 scope=rowgroup>Question {index}. "
            f"{html.escape(parts[0]['title'])}</th></tr>"
        )
        for g in parts:
            v = g["verdict"]
            score = "pending" if v["score"] is None else f"{v['score']:g} / {v['points']:g}"
            expected = f"<br>expected: {html.escape(v['expected'])}" if v["expected"] else ""
            rows.append(
                f"<tr class={v['status']}><td>{html.escape(v['variable'] or v['part'])}</td>"
                f"<td>{html.escape(v['given'] or '—')}{expected}</td><td>{score}</td>"
                f"<td>{html.escape(v['feedback'])}</td></tr>"
            )
        if solutions and parts[0]["question"] in solutions:
            rows.append(
                f"<tr><td colspan=4><div class=solution><b>Worked solution.</b> "
                f"{solutions[parts[0]['question']]}</div></td></tr>"
            )
    error = (
        f"<p class=wrong>Your notebook could not be run: {html.escape(result['error'])}</p>"
        if result["error"]
        else ""
    )
    if result.get("released_to"):
        error += f"<p class=wrong>{html.escape(identity_note(result))}</p>"
    error += "".join(f"<p class=late>{html.escape(line)}</p>" for line in late_lines(result))
    cells = "".join(f"<li>{html.escape(e)}</li>" for e in result["cell_errors"])
    cells = f"<p>Cells that raised an error:</p><ul>{cells}</ul>" if cells else ""
    return (
        f"<p class=score>{result['score']:g} / {result['max_score']:g} points</p>{error}{cells}"
        "<table><tr><th scope=col>part</th><th scope=col>your answer</th>"
        "<th scope=col>score</th><th scope=col>feedback</th></tr>" + "".join(rows) + "</table>"
    )


# --- CSVs ----------------------------------------------------------------------------


def _question_scores(result: Result) -> dict[int, float]:
    scores: dict[int, float] = defaultdict(float)
    for g in result["parts"]:
        scores[g["index"]] += g["verdict"]["score"] or 0.0
    return scores


SUMMARY_LATE = ("earned", "submitted_at", "late_by", "late_days_spent", "late_penalty")


def problems(result: Result) -> list[str]:
    """What went wrong in a result, for the instructor: the notebook that could not be run,
    the cells that raised (the rest was still graded), the checks that failed (the grader's
    fault: those parts are pending)."""
    return (
        ([result["error"]] if result["error"] else [])
        + [f"raised in {e}" for e in result["cell_errors"]]
        + [f"check failed: {e}" for e in result.get("check_errors", [])]
    )


def _inert(text: str) -> str:
    """A cell a spreadsheet shows as text, never runs as a formula (the error column holds
    what a submission's code wrote): a leading = + - @ tab or CR is quoted away."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def summary_csv(results: list[Result]) -> str:
    """One row per student: a column per question, what was earned, the submission time
    and what lateness cost (the share of the earned score lost), the total and the error."""
    indices = sorted({g["index"] for r in results for g in r["parts"]})
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["student_id", *(f"Q{i}" for i in indices), *SUMMARY_LATE, "total", "max", "error"])
    for r in results:
        q = _question_scores(r)
        late = r.get("late") or {}
        w.writerow(
            [
                r["student_id"],
                *(f"{q.get(i, 0):g}" for i in indices),
                f"{r.get('earned', r['score']):g}",
                late.get("submitted_at") or "",
                f"{late['late_seconds'] / 3600:.2f} h" if late.get("late_seconds") else "",
                late.get("pool_days") or "",
                f"{late['penalty']:g}" if late.get("penalty") else "",
                f"{r['score']:g}",
                f"{r['max_score']:g}",
                _inert("; ".join(problems(r))),
            ]
        )
    return out.getvalue()


def canvas_csv(results: list[Result], roster: dict[str, dict[str, str]], column: str) -> str:
    """Canvas gradebook import (see :mod:`.lms`, which also reads Canvas's export)."""
    from autograder.semester import lms

    return lms.canvas_csv(results, roster, column)


def moodle_csv(results: list[Result], roster: dict[str, dict[str, str]], column: str) -> str:
    """Moodle grade import, matched on the email or the ID number (see :mod:`.lms`)."""
    from autograder.semester import lms

    return lms.moodle_csv(results, roster, column)


# --- instructor report ----------------------------------------------------------------


def _change(c: dict[str, Any]) -> str:
    """One line of the report's history: when, what, who and why."""
    d = c["detail"]
    if c["kind"] == "regrade":
        what = (
            f"regrade: {d['from_harvest']} from stored harvests, {d['rerun']} notebooks run "
            f"again; {d['gained']} gained, {d['lost']} lost ({d['diff']})"
        )
    else:
        what = "; ".join(f"{k}: {v[0]} → {v[1]}" for k, v in d.items())
    return f"{c['at']}: {what}, by {c['by']} ({c['why']})"


def instructor_report(
    results: list[Result],
    *,
    title: str,
    signals: dict[str, list[str]],
    history: list[dict[str, Any]] = (),
    analysis: str = "",
) -> str:
    """Score histogram, per-question success, misconception counts, errors, late work,
    copy signals, the history of changes (deadlines, policy, regrades: who and why), and
    ``analysis``: the item analysis and fairness section (:func:`analysis_section`)."""
    n = len(results)
    maximum = results[0]["max_score"] if results else 0

    def autograded_share(r: Result) -> float:
        """The score over the points graded automatically (pending parts left out)."""
        auto = sum(g["verdict"]["points"] for g in r["parts"] if g["verdict"]["score"] is not None)
        return r["score"] / auto if auto else 0.0

    bins = Counter(min(9, int(10 * autograded_share(r))) for r in results)
    histogram = [(f"{10 * b}–{10 * b + 10} %", float(bins.get(b, 0))) for b in range(10)]
    success: dict[str, list[float]] = defaultdict(list)
    misconceptions: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for r in results:
        for g in r["parts"]:
            v = g["verdict"]
            statuses[v["status"]] += 1
            if v["score"] is not None and v["points"]:
                success[f"Q{g['index']} {v['variable'] or v['part']}"].append(
                    v["score"] / v["points"]
                )
            if v["misconception"]:
                misconceptions[f"Q{g['index']} {v['misconception']}"] += 1
    rates = [(k, round(100 * sum(v) / len(v), 1)) for k, v in success.items()]
    errors = [f"{r['student_id']}: {r['error']}" for r in results if r["error"]]
    raised = [
        f"{r['student_id']} ({r['score']:g} / {r['max_score']:g} points still earned): {e}"
        for r in results
        for e in r["cell_errors"]
    ]
    broken = Counter(  # one line per failure of a check, its seed left out
        _SEED.sub("", e) for r in results for e in r.get("check_errors", [])
    )
    checks = [
        f"{e} ({n} submission{'s' * (n != 1)}; those parts are pending)" for e, n in broken.items()
    ]
    copy = [f"{sid}: {s}" for sid, items in sorted(signals.items()) for s in items]
    late = [
        f"{r['student_id']}: {r['late']['note']}"
        + (f" {r['late']['extension']}" if r["late"]["extension"] else "")
        for r in results
        if r.get("late") and r["late"]["late_seconds"] > 0
    ]
    clocks = [
        f"{r['student_id']}: {r['late']['warning']}"
        for r in results
        if r.get("late") and r["late"]["warning"]
    ]
    versions = [
        f"{r['student_id']}'s notebook says variant version {r['claimed_version']}; graded "
        "with the version the seed ledger says was theirs when it was submitted"
        for r in results
        if r.get("claimed_version") is not None
    ]
    swapped = [
        f"{r['student_id']} submitted the notebook released to {r['released_to']} "
        f"(graded with {r['student_id']}'s numbers)"
        for r in results
        if r.get("released_to")
    ]
    mean = sum(r["score"] for r in results) / n if n else 0

    def items(lines: list[str]) -> str:
        return (
            "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"
            if lines
            else "<p>none</p>"
        )

    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style><h1>{html.escape(title)}</h1>"
        f"<p>{n} submissions; mean {mean:.1f} / {maximum:g}; "
        f"{len(errors)} could not be run"
        + (f"; checks failed {sum(broken.values())} times" if broken else "")
        + ".</p>"
        "<h2>Scores</h2>"
        + plots.bars(
            "Students per score band (share of the autograded points)",
            histogram,
            maximum=max(bins.values(), default=1),
            x_label="students",
        )
        + "<h2>Success rate per part</h2>"
        + plots.bars(
            "Mean score per part, as a share of its points",
            rates,
            maximum=100,
            unit=" %",
            x_label="mean score (%)",
        )
        + "<h2>Misconceptions</h2>"
        + plots.bars(
            "Students whose answer was a declared misconception",
            misconceptions.most_common(),
            maximum=max(misconceptions.values(), default=1),
            x_label="students",
        )
        + analysis
        + f"<h2>Errors</h2>{items(errors)}"
        + "<h2>Checks that failed (the grader's errors: fix the check, then "
        + f"<code>scalegrade rekey</code> and <code>scalegrade regrade</code>)</h2>{items(checks)}"
        + f"<h2>Cells that raised an error</h2>{items(raised)}"
        f"<h2>Late work</h2>{items(late)}"
        f"<h2>Submission times to check</h2>{items(clocks)}"
        f"<h2>Notebooks released to another student</h2>{items(swapped)}"
        f"<h2>Notebooks claiming another variant (after a reseed)</h2>{items(versions)}"
        f"<h2>Copy signals (never penalised automatically)</h2>{items(copy)}"
        f"<h2>Changes</h2>{items([_change(c) for c in history])}</html>\n"
    )
