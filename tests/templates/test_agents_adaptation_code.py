"""Code checks of four questions: the LoRA layer (000 §5.2), group-wise quantization (000 §6.3),
unbiased pass@k and majority voting (000 §7.2-7.3) and the agent's calculator tool (000 §7.4).

For each: the reference scores full marks and the same grade twice, the starter scores 0,
each realistic mistake loses exactly the properties it breaks, garbage results score 0
without an exception, and the probe's result is plain JSON.  Real runs, no mocks: the LoRA
checks train the layer with autograd, the vote is tested by chi-square at a fixed seed.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections import Counter

import numpy as np
import pytest
import torch
from torch import nn

from autograder.grading.checks import grade_result, load_checks, run_locally
from tests.templates.codecheck import (
    TEMPLATES,
    fraction,
    function,
    grade,
    lost,
    names,
    probed,
    starter,
)

LORA = TEMPLATES / "adaptation" / "lora-code"
QUANT = TEMPLATES / "inference" / "group-quantization-code"
PASSK = TEMPLATES / "agents" / "pass-at-k-code"
CALC = TEMPLATES / "agents" / "calculator-tool-code"

GARBAGE = [None, {}, [], "x", {"start": 3, "forward": "x", "fit": [], "main": {"q": "nan"}}]


def probe_result(folder, fn, seed: int, checks: str = "checks.py"):
    """The probe's result exactly as the sandbox would send it (strict JSON)."""
    module = load_checks(folder, checks).module
    result = probed(module, fn, seed)
    return json.loads(json.dumps(result, allow_nan=False))


def messages(props: list[dict]) -> str:
    return " ".join(p["message"] for p in props if p["score"] < 1)


def assert_garbage_scores_zero(folder, checks: str = "checks.py"):
    grade_fn = load_checks(folder, checks).grade
    for junk in GARBAGE:
        props = grade_result(grade_fn, junk, 11, {})
        assert props and all(p["score"] == 0 for p in props), junk


# --- LoRA (000 §5.2; 001 ch. 0, LoRA in five lines) -------------------------------------

LORA_PROPS = {
    "start": "starts at the pretrained layer (B = 0)",
    "frozen": "W₀ and b frozen",
    "count": "r(d_in + d_out) trainable parameters",
    "update": "adds B A x to the frozen output",
    "scale": "scaled by α/r",
    "fit": "training A and B fits a rank-r change",
}


class LoRAParts(nn.Module):
    """A correct LoRA layer whose parts the mistakes below change one at a time."""

    freeze, b_zero, a_random, scaled = True, True, True, True

    def __init__(self, base: nn.Linear, r: int, alpha: float):
        super().__init__()
        self.base = base
        if self.freeze:
            base.requires_grad_(False)
        d_out, d_in = base.weight.shape
        a = torch.randn(r, d_in) / d_in**0.5 if self.a_random else torch.zeros(r, d_in)
        b = torch.zeros(d_out, r) if self.b_zero else torch.randn(d_out, r) / r**0.5
        self.A, self.B = nn.Parameter(a), nn.Parameter(b)
        self.scale = alpha / r if self.scaled else 1.0

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T


class LoRARandomB(LoRAParts):
    """Both factors random (Kaiming-style for both): the first output is not the base's."""

    b_zero = False


class LoRAUnfrozen(LoRAParts):
    """W₀ and b left trainable: they get gradients and count as trainable parameters."""

    freeze = False


class LoRAUnscaled(LoRAParts):
    """W₀ + BA without the α/r of Hu et al."""

    scaled = False


class LoRAZeroFactors(LoRAParts):
    """A = B = 0: the output starts right, but both gradients vanish and nothing trains."""

    a_random = False


class LoRATransposed(nn.Module):
    """A of shape d_in × r and B of shape r × d_out (x A B): a valid layout, not the contract's."""

    def __init__(self, base: nn.Linear, r: int, alpha: float):
        super().__init__()
        self.base = base.requires_grad_(False)
        d_out, d_in = base.weight.shape
        self.A = nn.Parameter(torch.randn(d_in, r) / d_in**0.5)
        self.B = nn.Parameter(torch.zeros(r, d_out))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.scale * x @ self.A @ self.B


@pytest.mark.parametrize("seed", [11, 2024])
def test_lora_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(LORA, "solution.py", "LoRALinear")
    first = grade(LORA, fn, seed)
    assert names(first) == set(LORA_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(LORA, fn, seed) == first


def test_lora_starter_scores_zero():
    props = grade(LORA, starter(LORA, "LoRALinear"), 11)
    assert fraction(props) == 0
    assert "NotImplementedError" in props[0]["message"]


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (LoRARandomB, {"start"}, "B must start at zero"),
        (LoRAUnfrozen, {"frozen", "count"}, "requires_grad_(False)"),
        (LoRAUnscaled, {"scale"}, "scale it by α/r"),
        (LoRAZeroFactors, {"fit"}, "A must start random"),
        (LoRATransposed, {"update", "scale"}, "A has shape"),
    ],
)
def test_lora_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(LORA, fn, 11)
    assert lost(props) == {LORA_PROPS[k] for k in broken}, messages(props)
    assert hint in messages(props)


def test_lora_reference_counts_the_notes_adapter():
    # §5.2 and 001 ch. 0: d = k = 4096, r = 8 trains 65 536 parameters, 0.39 % of 16.8 M
    layer = function(LORA, "solution.py", "LoRALinear")(nn.Linear(4096, 4096), 8, 16)
    trainable = sum(p.numel() for p in layer.parameters() if p.requires_grad)
    assert trainable == 65_536
    assert round(100 * trainable / 4096**2, 2) == 0.39


def test_lora_garbage_scores_zero_and_the_probe_is_plain_json():
    assert_garbage_scores_zero(LORA)
    result = probe_result(LORA, function(LORA, "solution.py", "LoRALinear"), 5)
    assert set(result) == {"start", "forward", "fit", "under"}


def test_lora_training_is_judged_on_the_layers_own_factors_with_a_wide_margin():
    """While training, the reference's outputs and gradients are those of base(x) + B A x
    with the probe's A and B to float32 rounding (outputs 2e-7, gradients 4e-6 relative at
    the worst of seeds 0-39), far below the tolerances; A and B read back are the ones set,
    and B A is read as 0 at construction (issue 36)."""
    checks = load_checks(LORA, "checks.py").module
    result = probe_result(LORA, function(LORA, "solution.py", "LoRALinear"), 5)
    assert result["start"]["update0"] == 0
    for run in ("fit", "under"):
        rec = result[run]
        assert rec["held_as_set"] is True and abs(rec["factor"] - 1) < 1e-6
        assert rec["out_err"] < checks.OUT_TOL / 100
        assert rec["grad_err"] < checks.GRAD_TOL / 100


# --- group-wise quantization (000 §6.3) ---------------------------------------------------

QUANT_PROPS = {
    "codes": "integer codes within ±(2^(b−1) − 1)",
    "scale": "one absmax scale per group",
    "round": "round trip within half a step: |w − s·q| ≤ s/2",
    "zero": "a group of zeros gives codes 0, no NaN",
    "groups": "smaller groups, smaller error with outliers",
}


def _groups(w, group):
    w = np.asarray(w, dtype=np.float64)
    return w.reshape(w.shape[0], -1, group)


def quant_unsigned(w, bits, group):
    """2^b − 1 levels, as for unsigned codes: codes up to 15 in 4 bits."""
    g = _groups(w, group)
    s = np.abs(g).max(axis=-1) / (2**bits - 1)
    q = np.round(g / np.where(s > 0, s, 1.0)[..., None])
    return q.astype(np.int32).reshape(np.shape(w)), s


def quant_truncated(w, bits, group):
    """astype(int) instead of round: errors up to a whole step."""
    g = _groups(w, group)
    s = np.abs(g).max(axis=-1) / (2 ** (bits - 1) - 1)
    q = (g / np.where(s > 0, s, 1.0)[..., None]).astype(np.int8)
    return q.reshape(np.shape(w)), s


def quant_per_row(w, bits, group):
    """One scale per row, group_size ignored: the notes' quantize() on the whole row."""
    w = np.asarray(w, dtype=np.float64)
    s = np.abs(w).max(axis=-1, keepdims=True) / (2 ** (bits - 1) - 1)
    return np.round(w / s).astype(np.int8), s


def quant_zero_division(w, bits, group):
    """No guard for max|w| = 0: 0/0 is NaN, cast to int32 garbage."""
    g = _groups(w, group)
    s = np.abs(g).max(axis=-1) / (2 ** (bits - 1) - 1)
    with np.errstate(invalid="ignore"):
        q = np.round(g / s[..., None]).astype(np.int32)
    return q.reshape(np.shape(w)), s


def quant_float_codes(w, bits, group):
    """The right codes, left as floats."""
    q, s = function(QUANT, "solution.py", "quantize_groups")(w, bits, group)
    return q.astype(np.float32), s


def quant_torch(w, bits, group):
    """A float32 torch version with clamp(min=1e-12): correct."""
    t = torch.as_tensor(w, dtype=torch.float32)
    g = t.reshape(t.shape[0], -1, group)
    s = g.abs().amax(-1) / (2 ** (bits - 1) - 1)
    return torch.round(g / s.clamp(min=1e-12)[..., None]).to(torch.int8).reshape(t.shape), s


@pytest.mark.parametrize("seed", [11, 2024])
def test_quant_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(QUANT, "solution.py", "quantize_groups")
    first = grade(QUANT, fn, seed)
    assert names(first) == set(QUANT_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(QUANT, fn, seed) == first
    assert fraction(grade(QUANT, quant_torch, seed)) == 1  # float32 and torch tensors pass


def test_quant_starter_scores_zero():
    props = grade(QUANT, starter(QUANT, "quantize_groups"), 11)
    assert fraction(props) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (quant_unsigned, {"codes", "scale"}, "symmetric signed range"),
        (quant_truncated, {"round"}, "nearest integer"),
        (quant_per_row, {"scale", "round", "groups"}, "one scale per group"),
        (quant_zero_division, {"zero"}, "safe scale"),
        (quant_float_codes, {"codes"}, "integer codes"),
    ],
)
def test_quant_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(QUANT, fn, 11)
    assert lost(props) == {QUANT_PROPS[k] for k in broken}, messages(props)
    assert hint in messages(props)


def test_quant_reference_reproduces_the_notes_errors():
    # §6.3's code: 1024 × 1024 weights of scale 0.02 with 20 outliers of 0.5; int4 relative
    # error 0.882 with one scale for the tensor, 0.124 with one scale per 128 weights
    rng = np.random.default_rng(0)
    w = 0.02 * rng.standard_normal((1024, 1024))
    w[rng.integers(0, 1024, 20), rng.integers(0, 1024, 20)] = 0.5
    quantize = function(QUANT, "solution.py", "quantize_groups")

    def error(rows):
        q, s = quantize(w.reshape(rows, -1), 4, w.size // rows if rows == 1 else 128)
        w_hat = (q.reshape(len(s), -1, q.shape[1] // s.shape[1]) * s[..., None]).reshape(w.shape)
        return np.linalg.norm(w_hat - w) / np.linalg.norm(w)

    assert round(error(1), 3) == 0.882
    assert round(error(8192), 3) == 0.124


def test_quant_garbage_scores_zero_and_the_probe_is_plain_json():
    assert_garbage_scores_zero(QUANT)
    probe_result(QUANT, function(QUANT, "solution.py", "quantize_groups"), 5)


# --- unbiased pass@k (000 §7.3, Proposition 7.5) ------------------------------------------

PASSK_PROPS = {
    "values": "equals 1 − C(n − c, k)/C(n, k)",
    "edges": "edge cases: 0 when c = 0, 1 when n − c < k",
    "huge": "large n without overflow",
    "unbiased": "unbiased: averages to 1 − (1 − p)^k",
}


def pass_at_k_plug_in(n, c, k):
    """1 − (1 − c/n)^k: the biased plug-in estimate."""
    return 1 - (1 - c / n) ** k


def pass_at_k_float_factorials(n, c, k):
    """C(n, k) as a float of factorials: OverflowError once C(n, k) > 10^308."""

    def comb(a, b):
        return math.factorial(a) / (math.factorial(b) * math.factorial(a - b)) if a >= b else 0

    return 1 - comb(n - c, k) / comb(n, k)


def pass_at_k_logs(n, c, k):
    """The product in log space, without the n − c < k case: log of 0 or of a negative."""
    return 1 - math.exp(sum(math.log(1 - k / i) for i in range(n - c + 1, n + 1)))


def pass_at_k_floor_division(n, c, k):
    """// instead of /: the ratio of the binomials becomes 0."""
    return 1 - math.comb(n - c, k) // math.comb(n, k)


def pass_at_k_notes(n, c, k):
    """The notes' code, with exact integers: correct."""
    return 1.0 if n - c < k else 1 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("seed", [11, 2024])
def test_pass_at_k_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(PASSK, "solution.py", "pass_at_k")
    first = grade(PASSK, fn, seed)
    assert names(first) == set(PASSK_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(PASSK, fn, seed) == first
    assert fraction(grade(PASSK, pass_at_k_notes, seed)) == 1


def test_pass_at_k_starter_scores_zero():
    assert fraction(grade(PASSK, starter(PASSK, "pass_at_k"), 11)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (pass_at_k_plug_in, {"values", "edges", "huge", "unbiased"}, "biased"),
        (pass_at_k_float_factorials, {"huge"}, "OverflowError"),
        (pass_at_k_logs, {"edges", "unbiased"}, "math domain error"),
        (pass_at_k_floor_division, {"values", "huge", "unbiased"}, "Proposition 7.5"),
    ],
)
def test_pass_at_k_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(PASSK, fn, 11)
    assert lost(props) == {PASSK_PROPS[k] for k in broken}, messages(props)
    assert hint in messages(props)


def test_pass_at_k_reference_is_unbiased_in_the_notes_setting():
    # §7.3's code: p = 0.1, n = 20, k = 5; the estimator averages to pass@5 = 1 − 0.9^5
    fn = function(PASSK, "solution.py", "pass_at_k")
    mean = sum(math.comb(20, c) * 0.1**c * 0.9 ** (20 - c) * fn(20, c, 5) for c in range(21))
    assert mean == pytest.approx(1 - 0.9**5, abs=1e-12)
    assert fn(20, 0, 5) == 0 and fn(20, 16, 5) == 1  # Proposition 7.5: 1 when n − c < k


def test_pass_at_k_garbage_scores_zero_and_the_probe_is_plain_json():
    assert_garbage_scores_zero(PASSK)
    probe_result(PASSK, function(PASSK, "solution.py", "pass_at_k"), 5)


# --- majority vote (000 §7.2, Theorem 7.4, Exercise 14) -----------------------------------

VOTE_PROPS = {
    "winner": "returns the most common answer",
    "ties": "ties broken by the tie-breaker, among the most common",
    "plurality": "plurality vote succeeds with P(X ≥ 2) + P(X = 1)/r",
}


def vote(fn, seed: int) -> list[dict]:
    return run_locally(PASSK / "vote_checks.py", fn, seed)


def vote_first_seen(answers, choose):
    """Counter.most_common: ties go to the answer seen first."""
    return Counter(answers).most_common(1)[0][0]


def vote_strict_majority(answers, choose):
    """None unless an answer has more than half the votes."""
    answer, count = Counter(answers).most_common(1)[0]
    return answer if count > len(answers) / 2 else None


def vote_np_unique(answers, choose):
    """np.unique sorts: ties go to the smallest answer."""
    values, counts = np.unique(np.array(answers), return_counts=True)
    return values[np.argmax(counts)]


def vote_own_draw(answers, choose):
    """Ties broken uniformly at random, but by a generator of its own: the right law, not
    the tie-breaker's draw."""
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    return tied[np.random.randint(len(tied))]  # the global generator, which the probe seeds


def vote_choose_among_all(answers, choose):
    """Every answer handed to the tie-breaker, as if the vote were a draw from the list."""
    return choose(list(answers))


def vote_with_duplicates(answers, choose):
    """The tied answers as often as they were voted: still uniform among them."""
    counts = Counter(answers)
    top = max(counts.values())
    return choose([a for a in answers if counts[a] == top])


@pytest.mark.parametrize("seed", [11, 2024])
def test_vote_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(PASSK, "vote_solution.py", "majority_vote")
    first = vote(fn, seed)
    assert names(first) == set(VOTE_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert vote(fn, seed) == first
    assert fraction(vote(vote_with_duplicates, seed)) == 1  # equal weights: still uniform


def test_vote_starter_scores_zero():
    assert fraction(vote(starter(PASSK, "majority_vote", "vote_solution.py"), 11)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (vote_first_seen, {"ties", "plurality"}, "choose was never asked"),
        (vote_strict_majority, {"winner", "ties", "plurality"}, "without a strict majority"),
        (vote_np_unique, {"ties", "plurality"}, "1/r of those ties"),
        (vote_own_draw, {"ties", "plurality"}, "Call choose once"),
        (vote_choose_among_all, {"winner", "ties", "plurality"}, "the most common answers are"),
    ],
)
def test_vote_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = vote(fn, 11)
    assert lost(props) == {VOTE_PROPS[k] for k in broken}, messages(props)
    assert hint in messages(props)


def test_vote_garbage_scores_zero_and_the_probe_is_plain_json():
    assert_garbage_scores_zero(PASSK, "vote_checks.py")
    fn = function(PASSK, "vote_solution.py", "majority_vote")
    probe_result(PASSK, fn, 5, "vote_checks.py")


# --- the calculator tool (000 §7.1, §7.4) -------------------------------------------------

CALC_PROPS = {
    "chains": "+ and − from left to right, unary minus",
    "precedence": "* before + and −, parentheses",
    "exact": "exact integers of any size",
    "invalid": "ValueError on anything else",
    "long": "long input: a value or a ValueError",
    "code": "never runs its input as code",
}
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calc_whitelist_eval(expression):
    """A character whitelist, then eval: ** passes the whitelist, and eval runs."""
    if not re.fullmatch(r"[0-9+\-*() ]+", expression):
        raise ValueError("invalid characters")
    return eval(expression, {"__builtins__": {}})  # noqa: S307 - the mistake under test


def calc_eval(expression):
    """eval without builtins, its errors turned into ValueError: the code still runs."""
    try:
        return eval(expression, {"__builtins__": {}})  # noqa: S307 - the mistake under test
    except Exception as err:  # noqa: BLE001
        raise ValueError(str(err)) from None


def calc_notes(expression):
    """The notes' code as printed: SyntaxError and RecursionError escape."""

    def ev(node):
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        raise ValueError("unsupported expression")

    return ev(ast.parse(expression, mode="eval").body)


def calc_notes_syntax(expression):
    """The notes' code with SyntaxError turned into ValueError, RecursionError still escapes."""
    try:
        return calc_notes(expression)
    except SyntaxError as err:
        raise ValueError(str(err)) from None


TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


def _tokens(expression: str) -> list:
    out = []
    for number, other in TOKEN.findall(expression):
        if number:
            out.append(int(number))
        elif other in "+-*()":
            out.append(other)
        elif not other.isspace():
            raise ValueError(f"unexpected {other!r}")
    return out


class _Parser:
    """Recursive descent over + − * with unary minus and parentheses; loops, no recursion
    per term.  ``left_to_right`` ignores precedence; ``right_fold`` groups + and − from the
    right; ``as_float`` keeps the value in floats."""

    def __init__(self, left_to_right=False, right_fold=False, as_float=False):
        self.left_to_right, self.right_fold, self.as_float = left_to_right, right_fold, as_float

    def __call__(self, expression):
        self.toks, self.i, self.depth = _tokens(expression), 0, 0
        if not self.toks:
            raise ValueError("empty expression")
        value = self.flat() if self.left_to_right else self.sum()
        if self.i != len(self.toks):
            raise ValueError("unexpected token")
        return value

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        if self.i >= len(self.toks):
            raise ValueError("unexpected end")
        self.i += 1
        return self.toks[self.i - 1]

    def flat(self):  # every binary operator from left to right, * included
        value = self.unary()
        while self.peek() in ("+", "-", "*"):
            op, rhs = self.take(), self.unary()
            value = value + rhs if op == "+" else value - rhs if op == "-" else value * rhs
        return value

    def sum(self):
        terms, ops = [self.product()], []
        while self.peek() in ("+", "-"):
            ops.append(self.take())
            terms.append(self.product())
        if self.right_fold:  # a − b − c read as a − (b − c)
            value = terms[-1]
            for op, t in zip(reversed(ops), reversed(terms[:-1]), strict=True):
                value = t + value if op == "+" else t - value
            return value
        value = terms[0]
        for op, t in zip(ops, terms[1:], strict=True):
            value = value + t if op == "+" else value - t
        return value

    def product(self):
        value = self.unary()
        while self.peek() == "*":
            self.take()
            value = value * self.unary()
        return value

    def unary(self):
        sign = 1
        while self.peek() == "-":
            self.take()
            sign = -sign
        return sign * self.atom()

    def atom(self):
        tok = self.take()
        if tok == "(":
            self.depth += 1
            if self.depth > 100:
                raise ValueError("nested too deeply")
            value = self.flat() if self.left_to_right else self.sum()
            if self.take() != ")":
                raise ValueError("unbalanced parentheses")
            self.depth -= 1
            return value
        if isinstance(tok, int):
            return float(tok) if self.as_float else tok
        raise ValueError(f"unexpected {tok!r}")


@pytest.mark.parametrize("seed", [11, 2024])
def test_calculator_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(CALC, "solution.py", "calculator")
    first = grade(CALC, fn, seed)
    assert names(first) == set(CALC_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(CALC, fn, seed) == first
    assert fraction(grade(CALC, _Parser(), seed)) == 1  # a hand-written parser passes too


def test_calculator_starter_scores_zero():
    assert fraction(grade(CALC, starter(CALC, "calculator"), 11)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (calc_whitelist_eval, {"code", "invalid", "long"}, "ran code written in its input"),
        (calc_eval, {"code", "invalid"}, "a parser refuses it at once"),
        (calc_notes, {"invalid", "long"}, "SyntaxError"),
        (calc_notes_syntax, {"long"}, "RecursionError"),
        (_Parser(left_to_right=True), {"precedence"}, "2 + 3 * 4 = 14"),
        (_Parser(right_fold=True), {"chains"}, "group from the left"),
        (_Parser(as_float=True), {"exact"}, "not an int"),
    ],
)
def test_calculator_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(CALC, fn, 11)
    assert lost(props) == {CALC_PROPS[k] for k in broken}, messages(props)
    assert hint in messages(props)


def test_calculator_reference_runs_the_notes_agent_loop_arithmetic():
    # §7.4's loop sends "{total} + {x}" or "{total} - {x}"; a wrong call makes totals negative
    fn = function(CALC, "solution.py", "calculator")
    assert fn("-17 - 25") == -42 and fn("2 + 3 * (4 - 6)") == -4
    assert fn("123456789012345678901 * 1000") == 123456789012345678901000
    for bad in ["2 ** 100", "__import__('os').getcwd()", "7 / 2", "(1 + 2", "", "True + 1"]:
        with pytest.raises(ValueError):
            fn(bad)


def test_calculator_garbage_scores_zero_and_the_probe_is_plain_json():
    assert_garbage_scores_zero(CALC)
    probe_result(CALC, function(CALC, "solution.py", "calculator"), 5)
