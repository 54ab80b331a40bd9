"""The harvest's schema: what comes back from the student's process and the probe process
is checked here as hostile data: plain JSON values, capped, the text cleaned of what
cannot be written (lone surrogates, NUL) once, at this boundary."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .plan import HarvestError, Plan

MAX_ERROR_CHARS = 2000
MAX_TYPE_CHARS = 300
MAX_STRING_CHARS = 1000
MAX_DEPTH = 40
NONFINITE = ("nan", "inf", "-inf")
MAX_KEY_SHOWN = 100  # of a key, in the path a HarvestError names
_UNSAFE = re.compile(r"[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8 text: each lone surrogate (``json.loads`` makes one of a
    ``"\\ud800"`` escape) and each NUL replaced by U+FFFD, one character for one, so that
    caps and lengths stay as they were.  Every string from the sandbox, or from a notebook
    file, passes here before a verdict, the gradebook, a page or a file can see it."""
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    return _UNSAFE.sub("\ufffd", text)


def _plain(value: Any, where: str, depth: int = 0) -> Any:
    """A copy of ``value`` if it is JSON data (dict with str keys, list, str, int, float,
    bool, None) nested at most MAX_DEPTH deep; else HarvestError.  Strings and keys come
    back cleaned (:func:`clean_text`); two keys that clean to the same text are one key,
    the later one's value, as ``json.loads`` keeps the last of a repeated key."""
    if depth > MAX_DEPTH:
        raise HarvestError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if t is str:
        return clean_text(value)
    if value is None or t in (bool, int, float):
        return value
    if t is list:
        return [_plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise HarvestError(f"{where}: a key is not a string")
            k = clean_text(k)
            out[k] = _plain(v, f"{where}.{k[:MAX_KEY_SHOWN]}", depth + 1)
        return out
    raise HarvestError(f"{where}: {t.__name__} is not plain data")


def _text(value: Any, where: str, limit: int) -> str:
    if type(value) is not str:
        raise HarvestError(f"{where}: expected a string")
    if len(value) > limit:
        raise HarvestError(f"{where}: longer than {limit} characters")
    return clean_text(value)


def _keys(doc: Any, where: str, required: set[str]) -> dict:
    if type(doc) is not dict:
        raise HarvestError(f"{where}: expected an object")
    if set(doc) != required:
        extra, missing = sorted(set(doc) - required), sorted(required - set(doc))
        raise HarvestError(f"{where}: keys {extra} unexpected, {missing} missing")
    return doc


def _answer(doc: Any, where: str) -> dict:
    if type(doc) is not dict or type(doc.get("kind")) is not str:
        raise HarvestError(f"{where}: expected an object with a 'kind'")
    kind = doc["kind"]
    if kind == "number":
        _keys(doc, where, {"kind", "value"})
        value = doc["value"]
        if type(value) is str and value in NONFINITE:
            return {"kind": "number", "value": value}
        if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
            raise HarvestError(f"{where}: a number's value must be a finite number or {NONFINITE}")
        return {"kind": "number", "value": value}
    if kind == "string":
        _keys(doc, where, {"kind", "value"})
        return {"kind": "string", "value": _text(doc["value"], where, MAX_STRING_CHARS)}
    if kind == "missing":
        _keys(doc, where, {"kind"})
        return {"kind": "missing"}
    if kind == "unsupported":
        _keys(doc, where, {"kind", "type"})
        return {"kind": "unsupported", "type": _text(doc["type"], where, MAX_TYPE_CHARS)}
    raise HarvestError(f"{where}: unknown kind {kind[:40]!r}")


def check_harvest(doc: Any, plan: Plan) -> dict:
    """A fresh copy of ``doc`` if it is exactly a harvest for ``plan`` (see the brief's
    schema: cells, answers for every plan variable, results for every probe); else
    HarvestError naming the first problem."""
    _keys(doc, "harvest", {"cells", "answers", "probes"})
    if type(doc["cells"]) is not list:
        raise HarvestError("harvest.cells: expected a list")
    cells = []
    for i, cell in enumerate(doc["cells"]):
        where = f"harvest.cells[{i}]"
        _keys(cell, where, {"index", "ok", "error"})
        if type(cell["index"]) is not int or cell["index"] < 0 or type(cell["ok"]) is not bool:
            raise HarvestError(f"{where}: index must be a cell number and ok a boolean")
        error = cell["error"]
        if cell["ok"] and error is not None:
            raise HarvestError(f"{where}: an ok cell has no error")
        if not cell["ok"]:
            error = _text(error, f"{where}.error", MAX_ERROR_CHARS)
        cells.append({"index": cell["index"], "ok": cell["ok"], "error": error})
    _keys(doc["answers"], "harvest.answers", set(plan.variables))
    answers = {
        name: _answer(doc["answers"][name], f"harvest.answers.{name}") for name in plan.variables
    }
    _keys(doc["probes"], "harvest.probes", {p.id for p in plan.probes})
    probes = {}
    for probe in plan.probes:
        where = f"harvest.probes.{probe.id}"
        result = doc["probes"][probe.id]
        if type(result) is dict and result.get("ok") is True:
            _keys(result, where, {"ok", "result"})
            probes[probe.id] = {"ok": True, "result": _plain(result["result"], where)}
        elif type(result) is dict and result.get("ok") is False:
            # the probe process's word that the checks failed, not the student's code
            # (prober.checks_fault); a probe run in the student's process cannot say it
            blamed = probe.isolated and result.get("fault") == "checks"
            _keys(result, where, {"ok", "error", "fault"} if blamed else {"ok", "error"})
            probes[probe.id] = {
                "ok": False,
                "error": _text(result["error"], f"{where}.error", MAX_ERROR_CHARS),
                **({"fault": "checks"} if blamed else {}),
            }
        else:
            raise HarvestError(f"{where}: expected {{'ok': true, 'result': ...}} or an error")
    return {"cells": cells, "answers": answers, "probes": probes}


def probe_results(probed: bytes, ids: list[str]) -> dict:
    """The probe process's results (``{"probes": {...}}``); each missing one an error.  An
    error longer than MAX_ERROR_CHARS is cut there: the probe process is the grader's, and
    its long message must not cost the student the whole harvest (check_harvest cleans)."""
    missing = {"ok": False, "error": "the probe process ended without a result"}
    try:
        doc = json.loads(probed.decode("utf-8")) if probed else {}
    except (ValueError, RecursionError):
        doc = {}
    got = doc.get("probes") if type(doc) is dict else None
    got = got if type(got) is dict else {}
    out = {pid: got.get(pid, missing) for pid in ids}
    for pid, result in out.items():
        if type(result) is dict and result.get("ok") is False and type(result.get("error")) is str:
            out[pid] = {**result, "error": result["error"][:MAX_ERROR_CHARS]}
    return out
