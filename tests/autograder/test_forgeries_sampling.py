"""Forgeries of the two sampling checks (issue 36, items 3 and 4): the law a check tests,
sampled without the algorithm it is meant to measure.  Run through the real sandbox, as
in test_forgeries.py, whose helpers and ``sandbox`` fixture this uses.

The speculative sampler (000 §6.4, Theorem 6.11) was called with (p, q, rng) and judged on
output marginals: the joint law of (token, accepted) can be drawn without drafting or
verifying anything (Bernoulli(α), then min(p, q)/α or the residual; or a token of p, then
the flag), and low-discrepancy numbers or counts dealt in turn make every marginal come
out right.  Against that check each forgery below scored 1.0 (their plain versions: a
token of p, 0.375; one fixed uniform, 0).  Now the drafts are the probe's, drawn from a
generator the student's process never sees, each step is judged given its draft, and
consecutive steps are tested for independence: every forgery scores what its plain
version scores.

The majority vote (000 §7.2, Exercise 14) was called with (answers, rng) and judged on the
law of the winners: ties randomised only on the list asked again and again, drawn from a
generator of the student's own, dealt so that answers and pairs even out, or read ahead
from the handed generator's state each scored 1.0 (the first-seen vote, 0.6).  Now every
call gets a tie-breaker of the probe's, which draws from the probe's own generator and logs
what it is asked, and each call is judged exactly on the list and the draw it was served.

The routes: the joint law sampled without drafting; low-discrepancy or dealt outputs; the
vote's law sampled without counting; generator state read ahead; and two beyond them: the
batch's drafts read from the harness's frame (the sampler), the tie-breaker asked again
until it gives the answer wanted (the vote).
"""

from __future__ import annotations

from tests.autograder import test_forgeries
from tests.autograder.test_forgeries import LEAKS, scored_alike
from tests.sandboxes import everywhere

sandbox = everywhere(test_forgeries.LIMITS)  # on the host, then in the grading image

SAMPLER, STEP = "serving/speculative-sampler-code", "speculative_step"
VOTE, VOTE_FN, VOTE_CHECKS = "agents/pass-at-k-code", "majority_vote", "vote_checks.py"

# --- the speculative sampler (000 §6.4, Theorem 6.11) ---------------------------------------

A_TOKEN_OF_P = """
import numpy as np
def speculative_step(p, q, x, rng):  # a token of p, flagged kept: the draft never verified
    return int(rng.choice(len(p), p=p)), True
"""
ONE_FIXED_UNIFORM = """
import numpy as np
def _inverse_cdf(w, u):
    c = np.cumsum(w / w.sum())
    return min(int(np.searchsorted(c, u, side="right")), len(w) - 1)
def speculative_step(p, q, x, rng):  # 0.5 for every test and every residual draw
    if 0.5 < min(1.0, p[x] / q[x]):
        return x, True
    return _inverse_cdf(np.maximum(p - q, 0.0), 0.5), False
"""
INVERSE_CDF = """
import numpy as np
def _inverse_cdf(w, u):
    c = np.cumsum(w / w.sum())
    return min(int(np.searchsorted(c, u, side="right")), len(w) - 1)
"""

JOINT_LAW = {
    # Bernoulli(α), then a token of min(p, q)/α or of the residual: the law of (token,
    # accepted) the old checks tested, the draft x ignored
    "Bernoulli(α) first": """
import numpy as np
def speculative_step(p, q, x, rng):
    keep = np.minimum(p, q)
    if rng.random() < keep.sum():
        return int(rng.choice(len(p), p=keep / keep.sum())), True
    rest = np.maximum(p - q, 0.0)
    return int(rng.choice(len(p), p=rest / rest.sum())), False
""",
    # the same law the other way round: a token y of p, then kept with P(kept | y)
    "a token of p first": """
import numpy as np
def speculative_step(p, q, x, rng):
    y = int(rng.choice(len(p), p=p))
    return y, bool(rng.random() < min(p[y], q[y]) / p[y])
""",
}

DEALT = {
    # Weyl sequences instead of rng: the golden ratio's for the tests, √2's for the residual
    # draws, so that every count comes out at its expected value
    "low-discrepancy numbers": INVERSE_CDF
    + """
_n = [0, 0]  # steps, rejections
def speculative_step(p, q, x, rng):
    _n[0] += 1
    if (_n[0] * 0.6180339887498949) % 1.0 < min(1.0, p[x] / q[x]):
        return x, True
    _n[1] += 1
    return _inverse_cdf(np.maximum(p - q, 0.0), (_n[1] * 0.4142135623730950) % 1.0), False
""",
    # each drafted token kept floor(n·a) times in its first n drafts, and the residual
    # token furthest behind its share given after each rejection
    "dealt in turn": """
import numpy as np
from collections import defaultdict
_seen, _kept, _dealt = defaultdict(int), defaultdict(int), {}
def speculative_step(p, q, x, rng):
    a = min(1.0, p[x] / q[x])
    _seen[x] += 1
    if int(_seen[x] * a) > _kept[x]:
        _kept[x] += 1
        return x, True
    w = np.maximum(p - q, 0.0)
    counts = _dealt.setdefault("counts", np.zeros(len(p)))
    i = int(np.argmax((counts.sum() + 1) * w / w.sum() - counts))
    counts[i] += 1
    return i, False
""",
}

READ_AHEAD = {
    # the handed generator's next numbers read from its state, used in sorted order (the
    # generator then set where they end): each block of tests and of residual draws holds
    # uniforms, but dealt from the smallest to the largest
    "the generator's numbers sorted": INVERSE_CDF
    + """
_ahead = {}
def _next(rng, what):
    if not _ahead.get(what):
        ahead = np.random.Generator(type(rng.bit_generator)())
        ahead.bit_generator.state = rng.bit_generator.state
        _ahead[what] = sorted(ahead.random(1000))
        rng.bit_generator.state = ahead.bit_generator.state
    return _ahead[what].pop()
def speculative_step(p, q, x, rng):
    if _next(rng, "test") < min(1.0, p[x] / q[x]):
        return x, True
    return _inverse_cdf(np.maximum(p - q, 0.0), _next(rng, "residual")), False
""",
}

# were the probe drafting from the stream it hands over, a clone of the generator's state
# would know the drafts: this step drafts from such a clone instead of taking x
PREDICTED_DRAFTS = """
import numpy as np
_clone = []
def speculative_step(p, q, x, rng):
    if not _clone:
        _clone.append(np.random.Generator(type(rng.bit_generator)()))
        _clone[0].bit_generator.state = rng.bit_generator.state
    g = _clone[0]
    y = int(g.choice(len(q), p=q))
    if g.random() < min(1.0, p[y] / q[y]):
        return y, True
    rest = np.maximum(p - q, 0.0)
    return int(g.choice(len(p), p=rest / rest.sum())), False
"""

# beyond the routes: the drafts of the whole batch are among the harness's locals in this
# process (one round trip sends a thousand calls); a dealer that knows them keeps exactly
# round(n·a) of the n drafts of each token it will see, spread evenly: it scores as the
# dealer that does not (knowing the drafts ahead tells nothing of how to decide)
BATCH_READ = """
import sys
import numpy as np
from collections import defaultdict
_plan, _dealt = {}, {}
def _batch():  # the calls of this round trip: a list of [p, q, x, rng] in a caller's locals
    frame = sys._getframe(2)
    while frame is not None:
        for value in frame.f_locals.values():
            if (isinstance(value, list) and value and isinstance(value[0], list | tuple)
                    and len(value[0]) == 4 and type(value[0][2]) is int):
                return [int(c[2]) for c in value]
        frame = frame.f_back
    raise AssertionError("the batch's drafts were not found")
def speculative_step(p, q, x, rng):
    if not _plan.get("queue"):
        drafts = _batch()
        assert drafts[0] == x
        seen, queue = defaultdict(int), []
        totals = {t: drafts.count(t) for t in set(drafts)}
        for t in drafts:
            a, n = min(1.0, p[t] / q[t]), totals[t]
            seen[t] += 1
            queue.append(int(seen[t] * round(n * a) / n) > int((seen[t] - 1) * round(n * a) / n))
        _plan["queue"] = queue[::-1]
    if _plan["queue"].pop():
        return x, True
    w = np.maximum(p - q, 0.0)
    counts = _dealt.setdefault("counts", np.zeros(len(p)))
    i = int(np.argmax((counts.sum() + 1) * w / w.sum() - counts))
    counts[i] += 1
    return i, False
"""


def test_sampler_joint_law_sampled_without_drafting(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, SAMPLER, STEP, A_TOKEN_OF_P, JOINT_LAW, "sampler")
    assert plain == 0  # no kept draft is the token returned: nothing else is judged


def test_sampler_low_discrepancy_or_dealt_outputs(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, SAMPLER, STEP, ONE_FIXED_UNIFORM, DEALT)
    # kept drafts returned (weight 1 of 8); the rate, the residual (several tokens at this
    # seed) and the output fail
    assert plain == 1 / 8


def test_sampler_generator_state_read_ahead(sandbox, tmp_path):
    assert scored_alike(sandbox, tmp_path, SAMPLER, STEP, ONE_FIXED_UNIFORM, READ_AHEAD) == 1 / 8
    predicted = {"predicted drafts": PREDICTED_DRAFTS}
    assert scored_alike(sandbox, tmp_path, SAMPLER, STEP, A_TOKEN_OF_P, predicted) == 0


def test_sampler_batch_read_ahead_and_the_probe_out_of_reach(sandbox, tmp_path):
    leaks = LEAKS + ONE_FIXED_UNIFORM.replace(
        "def speculative_step(p, q, x, rng):",
        """_found = []
def speculative_step(p, q, x, rng):
    if not _found:
        _found.append(_leaks(("drafts", "dists", "_keep_tests"), ("xs", "seed"), ()))
    assert not _found[0], _found[0]""",
    )
    frames = {"frames, modules and gc": leaks}
    assert scored_alike(sandbox, tmp_path, SAMPLER, STEP, ONE_FIXED_UNIFORM, frames) == 1 / 8
    dealer = DEALT["dealt in turn"]
    assert scored_alike(sandbox, tmp_path, SAMPLER, STEP, dealer, {"batch": BATCH_READ}) == 1 / 8


# --- the majority vote (000 §7.2, Theorem 7.4, Exercise 14) ---------------------------------

FIRST_SEEN = """
from collections import Counter
def majority_vote(answers, choose):  # most_common keeps the first seen of tied answers
    return Counter(answers).most_common(1)[0][0]
"""

WITHOUT_COUNTING = {
    # the first seen, but a tie drawn at random where the same list comes again (the old
    # check asked one tied list 3000 times)
    "randomised where asked again": """
import random
from collections import Counter
_asked = set()
def majority_vote(answers, choose):
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    key = tuple(map(repr, answers))
    if key in _asked:
        return random.choice(tied)
    _asked.add(key)
    return tied[0]
""",
    # ties uniformly at random, by a draw of its own: the right law at the output, not the
    # draw served
    "a draw of its own": """
import random
from collections import Counter
def majority_vote(answers, choose):
    counts = Counter(answers)
    top = max(counts.values())
    return random.choice([a for a, n in counts.items() if n == top])
""",
}

DEALT_TIES = {
    # the k tied answers dealt so that each of the k² pairs of consecutive calls comes in
    # turn: the answers and the pairs even out (the old check's two tests)
    "pairs dealt in turn": """
from collections import Counter
_asked = Counter()
def majority_vote(answers, choose):
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    k = len(tied)
    i = _asked[k]
    _asked[k] += 1
    pair = (i // 2) % (k * k)
    return tied[(pair // k) if i % 2 == 0 else (pair % k)]
""",
}

PREDICTED_TIES = {
    # the tie-breaker's draw predicted from the seeds this process was handed (the global
    # generators', seeded by the probe), and the tie-breaker never asked
    "the seeds handed over": """
import sys
import numpy as np
from collections import Counter
_guess = []
def majority_vote(answers, choose):
    if not _guess:
        torch = sys.modules.get("torch")
        seed = int(torch.initial_seed()) if torch else int(np.random.get_state()[1][0])
        _guess.append(np.random.default_rng(seed))
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    return tied[0] if len(tied) == 1 else tied[int(_guess[0].integers(len(tied)))]
""",
}

# beyond the routes: the tie-breaker asked again and again until it gives the first seen
REROLLED = {
    "asked until the first seen": """
from collections import Counter
def majority_vote(answers, choose):
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    if len(tied) == 1:
        return tied[0]
    for _ in range(3):
        if choose(tied) == tied[0]:
            break
    return tied[0]
""",
}


def vote_scored_alike(sandbox, tmp_path, forgeries: dict, part: str = "") -> float:
    return scored_alike(sandbox, tmp_path, VOTE, VOTE_FN, FIRST_SEEN, forgeries, part, VOTE_CHECKS)


def test_vote_law_sampled_without_counting(sandbox, tmp_path):
    plain = vote_scored_alike(sandbox, tmp_path, WITHOUT_COUNTING, "majority_vote")
    assert plain == 2 / 5  # the clear lists (2 of 5); no tie decided by the tie-breaker


def test_vote_dealt_ties_read_ahead_draws_and_rerolls(sandbox, tmp_path):
    assert vote_scored_alike(sandbox, tmp_path, DEALT_TIES) == 2 / 5
    assert vote_scored_alike(sandbox, tmp_path, PREDICTED_TIES) == 2 / 5
    assert vote_scored_alike(sandbox, tmp_path, REROLLED) == 2 / 5
