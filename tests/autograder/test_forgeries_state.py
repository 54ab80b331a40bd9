"""Forgeries of state kept across calls and of a generator read ahead (issue 36, items 2
and 3).  Run through the real sandbox, as in ``tests/autograder/test_forgeries.py``: each
forgery scores exactly what its plain version (the same wrong idea without the trick)
scores.

- Top-k with error feedback (000 §4.2, Code 4.9): ``topk_ef_step(grad, memory, k)`` must be
  a function of its arguments, the memory passed in and read back out.  The run of Code
  4.9 called the four workers in a fixed order from one process, so a top-k that ignored
  the memory passed in and kept its own, by call count (in module globals, in a file, on
  the function object), ran error feedback all the same and converged: 0.5625 of the
  points, where top-k without memory gets 0.1875.  The check now calls the workers in a
  shuffled order with an earlier call made again among them (the same inputs must give
  the same outputs), and judges every call of the run on what was passed in: the entries
  sent are the largest of grad + memory, with their values.
- REINFORCE with a baseline (001 §7.2, Ex. 10): ``reinforce_estimates(theta, b, n, rng)``
  got a NumPy generator, its state sent to the student's process, and two calls with
  generators seeded alike had to agree.  Outputs remembered (by call count, by input, in a
  file, on the function object) agreed without any draw from rng, and so did a generator
  made from rng's state (copied, hashed, jumped) that never advanced rng: full marks, where
  the global generator gets 0.8333.  Now ``rng`` stays in the probe process: the student's
  code gets a stub whose draws the probe serves and logs, and the check reads each
  rollout's action off its own draw.  Draws made for show (thrown away, twice as many, a
  stratified stream) leave the rollouts unexplained.
"""

from __future__ import annotations

from tests.autograder import test_forgeries
from tests.autograder.test_forgeries import scored_alike
from tests.sandboxes import everywhere

sandbox = everywhere(test_forgeries.LIMITS)  # on the host, then in the grading image

# --- top-k with error feedback (000 §4.2, Theorem 4.8, Code 4.9) -------------------------------

EF = "optimization/error-feedback-code"
NO_MEMORY = """
import numpy as np
def _top_k(v, k):
    out = np.zeros_like(v)
    idx = np.argsort(np.abs(v))[-k:]
    out[idx] = v[idx]
    return out
def topk_ef_step(grad, memory, k):  # top-k without the memory: error feedback forgotten
    return _top_k(np.asarray(grad, dtype=float), k), np.zeros(len(grad))
"""


def _hidden(setup: str, load: str, store: str) -> str:
    """NO_MEMORY whose calls on the run's vectors (d = 50; the single calls have other
    sizes) send top_k(grad + h) of a memory h of its own, the worker's as the forgery
    tells it, and keep h ← grad + h − sent: ``load`` finds h, ``store`` saves it.  The
    memory passed in is ignored, the memory returned stays 0, as in NO_MEMORY."""
    return NO_MEMORY.replace(
        "def topk_ef_step(grad, memory, k):  # top-k without the memory: error feedback forgotten\n"
        "    return _top_k(np.asarray(grad, dtype=float), k), np.zeros(len(grad))\n",
        setup
        + """def topk_ef_step(grad, memory, k):
    grad = np.asarray(grad, dtype=float)
    if grad.size != 50:
        return _top_k(grad, k), np.zeros(len(grad))
"""
        + load
        + """    v = grad + h
    sent = _top_k(v, k)
    h = v - sent
"""
        + store
        + """    return sent, np.zeros(len(grad))
""",
    )


EF_FORGERIES = {
    # the workers' memories in module globals, the worker told by the call count
    "memory in module globals, by call count": _hidden(
        "_calls, _memories = [0], {}\n",
        "    slot = _calls[0] % 4\n    _calls[0] += 1\n    h = _memories.get(slot, np.zeros(50))\n",
        "    _memories[slot] = h\n",
    ),
    # the same, every output cached by its inputs: a call made again answers alike
    "memory by call count, outputs cached by input": _hidden(
        "_calls, _memories, _cache = [0], {}, {}\n",
        "    key = (grad.tobytes(), np.asarray(memory, dtype=float).tobytes(), k)\n"
        "    if key in _cache:\n        return _cache[key]\n"
        "    slot = _calls[0] % 4\n    _calls[0] += 1\n"
        "    h = _memories.get(slot, np.zeros(50))\n",
        "    _memories[slot] = h\n    _cache[key] = (sent, np.zeros(len(grad)))\n",
    ),
    # the memories and the count in files under /tmp: a fresh process would find them
    "memory in files under /tmp": _hidden(
        "import os, tempfile\n_where = tempfile.mkdtemp(prefix='ef-')\n",
        "    count = os.path.join(_where, 'calls.npy')\n"
        "    calls = int(np.load(count)) if os.path.exists(count) else 0\n"
        "    np.save(count, calls + 1)\n"
        "    path = os.path.join(_where, f'{calls % 4}.npy')\n"
        "    h = np.load(path) if os.path.exists(path) else np.zeros(50)\n",
        "    np.save(path, h)\n",
    ),
    # the memories and the count as attributes of the function object
    "memory on the function object": _hidden(
        "",
        "    me = topk_ef_step\n"
        "    me.calls = getattr(me, 'calls', 0) + 1\n"
        "    me.memories = getattr(me, 'memories', {})\n"
        "    h = me.memories.get(me.calls % 4, np.zeros(50))\n",
        "    me.memories[me.calls % 4] = h\n",
    ),
    # beyond: the worker told by its gradient, the nearest to a worker's previous one
    # (the order of the calls no longer matters)
    "memory by the nearest previous gradient": _hidden(
        "_last, _memories = {}, {}\n",
        "    near = [(np.linalg.norm(grad - g), w) for w, g in _last.items()]\n"
        "    w = min(near)[1] if len(near) == 4 else len(near)\n"
        "    _last[w] = grad\n"
        "    h = _memories.get(w, np.zeros(50))\n",
        "    _memories[w] = h\n",
    ),
}


def test_error_feedback_state_kept_across_calls_scores_what_no_memory_scores(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, EF, "topk_ef_step", NO_MEMORY, EF_FORGERIES, part="ef")
    assert 0 < plain < 1  # exactly k entries, but no memory: it stalls (Code 4.9)


# --- REINFORCE with a baseline on a bandit (001 §7.2, example 7.6, Ex. 10) ---------------------

BANDIT = "rl/bandit-baseline-code"
GLOBAL = """
import math
import numpy as np
def reinforce_estimates(theta, b, n, rng):  # the actions from NumPy's global generator
    sigma = 1 / (1 + math.exp(-theta))
    actions = (np.random.random(n) < sigma).astype(float)
    return (actions - b) * (actions - sigma)
"""


def _remembered(setup: str, recall: str, keep: str) -> str:
    """GLOBAL whose outputs are remembered: ``recall`` returns an earlier output when it
    has one for this call, ``keep`` keeps ``out``."""
    return GLOBAL.replace(
        "def reinforce_estimates(theta, b, n, rng):  # the actions from NumPy's global generator\n",
        setup + "def reinforce_estimates(theta, b, n, rng):\n" + recall,
    ).replace(
        "    return (actions - b) * (actions - sigma)\n",
        "    out = (actions - b) * (actions - sigma)\n" + keep + "    return out\n",
    )


def _read_ahead(source: str) -> str:
    """GLOBAL whose actions come from ``source``, a generator made from rng without drawing
    from it, where rng lets itself be read (else from the global generator, as GLOBAL)."""
    return GLOBAL.replace(
        "    actions = (np.random.random(n) < sigma).astype(float)\n",
        f"""    try:
        made = {source}
    except Exception:
        made = np.random
    actions = (made.random(n) < sigma).astype(float)
""",
    )


BANDIT_FORGERIES = {
    # state kept across calls: the check's calls come in a known order, the last two alike
    "outputs in module globals, by call count": _remembered(
        "_outputs = []\n",
        "    if len(_outputs) == 8:  # the ninth call: the eighth's inputs again\n"
        "        _outputs.append(_outputs[-1])\n        return _outputs[-1]\n",
        "    _outputs.append(out)\n",
    ),
    "outputs cached by input": _remembered(
        "_cache = {}\n",
        "    if (theta, b, n) in _cache:\n        return _cache[theta, b, n]\n",
        "    _cache[theta, b, n] = out\n",
    ),
    "outputs in a file under /tmp": _remembered(
        "import hashlib, os, tempfile\n_where = tempfile.mkdtemp(prefix='reinforce-')\n",
        "    key = hashlib.sha256(repr((theta, b, n)).encode()).hexdigest()[:16]\n"
        "    path = os.path.join(_where, f'{key}.npy')\n"
        "    if os.path.exists(path):\n        return np.load(path)\n",
        "    np.save(path, out)\n",
    ),
    "outputs on the function object": _remembered(
        "",
        "    memo = reinforce_estimates.__dict__.setdefault('memo', {})\n"
        "    if (theta, b, n) in memo:\n        return memo[theta, b, n]\n",
        "    memo[theta, b, n] = out\n",
    ),
    # the generator read ahead: rng's stream reproduced, rng itself never drawn from
    "bit_generator.state copied": _read_ahead(
        "np.random.Generator(np.random.PCG64())\n"
        "        made.bit_generator.state = rng.bit_generator.state"
    ),
    "seeded from a hash of bit_generator.state": _read_ahead(
        "np.random.default_rng(int.from_bytes(__import__('hashlib').sha256("
        "repr(rng.bit_generator.state).encode()).digest()[:8], 'little'))"
    ),
    "bit_generator.jumped": _read_ahead("np.random.Generator(rng.bit_generator.jumped())"),
    # rng.spawn: a child stream, rng's own never drawn from (it gained nothing before
    # either: the generator rebuilt in the student's process had a seed sequence of its own)
    "rng.spawn": _read_ahead("rng.spawn(1)[0]"),
    # beyond: the probe's generator asked for through the stub's own channel, by the names
    # of its state (a method of P's object is called there; none of these is one)
    "the probe's generator asked for through the stub": GLOBAL.replace(
        "    actions = (np.random.random(n)",
        """    made = np.random
    try:
        server, handle, _ = object.__getattribute__(rng, "_call")
    except Exception:
        server = None
    for name in ("_gen", "bit_generator", "_served", "__dict__", "state"):
        try:
            state = server.callback(handle, name, (), {})
        except Exception:
            continue
        key = __import__("hashlib").sha256(repr(state).encode()).digest()[:8]
        made = np.random.default_rng(int.from_bytes(key, "little"))
        break
    actions = (made.random(n)""",
    ),
    # dummy calls: rng drawn from, what it served not what decides the rollouts
    "rng drawn, the draws thrown away": GLOBAL.replace(
        "    actions = (np.random.random(n)",
        "    rng.random(n)\n    actions = (np.random.random(n)",
    ),
    "rng drawn twice as many times, the second half used": GLOBAL.replace(
        "    actions = (np.random.random(n)", "    actions = (rng.random(2 * n)[n:]"
    ),
    # exactly round(σ n) rewarded rollouts, the smallest draws: the sample's frequency, mean
    # and spread carry no sampling error at all (it was "stream stratified" in
    # test_forgeries.py, placed by rng.permutation, which rng no longer offers)
    "stream stratified by rng's draws": GLOBAL.replace(
        "    actions = (np.random.random(n) < sigma).astype(float)\n",
        "    actions = np.zeros(n)\n"
        "    actions[np.argsort(rng.random(n))[: round(sigma * n)]] = 1.0\n",
    ),
}


def test_bandit_state_and_generator_read_ahead_score_what_the_global_generator_scores(
    sandbox, tmp_path
):
    fn = "reinforce_estimates"
    plain = scored_alike(sandbox, tmp_path, BANDIT, fn, GLOBAL, BANDIT_FORGERIES, part="estimator")
    assert 0 < plain < 1  # the estimates right, but not drawn from rng
