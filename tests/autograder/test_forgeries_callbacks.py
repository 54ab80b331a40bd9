"""Forgeries of the callbacks' arguments and of what a backward pass reveals (issue 36): a
check that counted the calls of a callback without looking at what it was given, and a
check that trusted a layer's outputs without relating them to the layer's own parameters.
Run through the real sandbox, as in ``tests/autograder/test_forgeries.py``: each forgery
scores exactly what its plain version (the same wrong idea without the trick) scores.

- Local SGD (000 §4.3): ``average(models)`` was counted, not read.  Fed zeros, stale models,
  a subset of the workers or a mean-preserving dummy, with the true mean taken locally, it
  looked like a round.  The check now grades each round on what it averaged: every
  worker's model after its step kH, which the probe process recomputes from the point of
  that worker's gradient query and the gradient it served.
- LoRA (000 §5.2): the cotangent of the fit's mean squared error is 2(pred − y)/n, so a
  layer could read the target out of its backward pass and return it, remember the fit's
  inputs, train a hidden matrix of its own, or hand Adam gradients that steer A and B to
  the answer.  The check now relates every output during the fit to base(x) + f·B A x
  with the probe's A and B, checks the gradients of A and B against that output's, reads
  the trained A and B back from the layer, computes the fit's loss from them, and checks
  the layer on inputs drawn after the fit.  And the start: the output at construction was
  trusted; B A read from the layer must now be zero.
"""

from __future__ import annotations

from tests.autograder import test_forgeries
from tests.autograder.test_forgeries import scored_alike
from tests.sandboxes import everywhere

sandbox = everywhere(test_forgeries.LIMITS)  # on the host, then in the grading image

# --- local SGD (000 §4.3): callbacks fed dummies ----------------------------------------------

LOCAL = "optimization/local-sgd-code"
NP_MEAN = """
import numpy as np
def local_sgd(grads, x0, lr, steps, H, average):
    xs = [np.array(x0, dtype=float) for _ in grads]
    for t in range(1, steps + 1):
        xs = [x - lr * g(x) for x, g in zip(xs, grads)]
        if t % H == 0:
            avg = np.mean(xs, axis=0)  # the mistake: averaged here, no round through average
            xs = [avg.copy() for _ in grads]
    return xs
"""


def _fed(models: str, setup: str = "") -> str:
    """NP_MEAN with ``average`` called at every round on ``models`` (an expression of xs,
    the workers' models, t, the step, and rng, a generator), its answer thrown away."""
    return NP_MEAN.replace(
        "            avg = np.mean(",
        f"            average({models})\n            avg = np.mean(",
    ).replace("    xs = [np.array(x0", f"{setup}    xs = [np.array(x0", 1)


LOCAL_FORGERIES = {
    # callbacks fed dummies: the count of rounds right, what was averaged not
    "average fed zeros": _fed("[np.zeros_like(x) for x in xs]"),
    "average fed the models before the round's last step": _fed(
        "before", "    before = [np.array(x0, dtype=float) for _ in grads]\n"
    ).replace(
        "        xs = [x - lr * g(x)",
        "        before = [x.copy() for x in xs]\n        xs = [x - lr * g(x)",
    ),
    "average fed the previous round's models": _fed(
        "previous", "    previous = [np.array(x0, dtype=float) for _ in grads]\n"
    ).replace(
        "            xs = [avg.copy() for _ in grads]",
        "            previous = [x.copy() for x in xs]\n"
        "            xs = [avg.copy() for _ in grads]",
    ),
    "average fed a random subset of the workers": _fed(
        "[xs[i] for i in rng.choice(rng.permutation(len(xs))[:-1], len(xs))]",
        "    rng = np.random.default_rng()\n",
    ),
    "average fed the true models at a random subset of the rounds": _fed(
        "xs if rng.random() < 0.5 and t != H else [np.ones_like(x) for x in xs]",
        "    rng = np.random.default_rng()\n",
    ),
    # beyond: dummies whose mean is the true mean, so that the answer of average is right
    "average fed p copies of the local mean": _fed("[np.mean(xs, axis=0)] * len(xs)"),
    "average fed the models plus a zero-sum perturbation": _fed(
        "[x + (i - 1.5) * 0.25 for i, x in enumerate(xs)]"
    ),
}


def test_local_sgd_callbacks_fed_dummies_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, LOCAL, "local_sgd", NP_MEAN, LOCAL_FORGERIES, part="local_sgd"
    )
    assert 0 < plain < 1  # the right models, but no communication round (000 §4.3)


# --- LoRA (000 §5.2): gradients and targets read back -----------------------------------------

LORA = "adaptation/lora-code"
ZERO_FACTORS = """
import torch
from torch import nn
LAYERS = []  # the probe builds: start, forward (α = r), forward (α), fit (r), under (r − 1)
class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        d_out, d_in = base.weight.shape
        self.A = nn.Parameter(torch.zeros(r, d_in))  # the mistake: A = B = 0, nothing trains
        self.B = nn.Parameter(torch.zeros(d_out, r))
        self.scale = alpha / r
        LAYERS.append(self)
        self.fit = len(LAYERS) == 4
        self.calls = 0
    def honest(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T
    def forward(self, x):
        return self.honest(x)
"""
RANDOM_B = """
import torch
from torch import nn
LAYERS = []
class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        d_out, d_in = base.weight.shape
        self.A = nn.Parameter(torch.randn(r, d_in) / d_in**0.5)
        self.B = nn.Parameter(torch.randn(d_out, r) / r**0.5)  # the mistake: B random
        self.scale = alpha / r
        LAYERS.append(self)
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T
"""


def _in_the_fit(forward: str) -> str:
    """ZERO_FACTORS whose fit layer (the fourth the probe builds) runs ``forward``."""
    return ZERO_FACTORS.replace(
        "    def forward(self, x):\n        return self.honest(x)\n",
        "    def forward(self, x):\n        if not self.fit:\n            return self.honest(x)\n"
        + forward,
    )


LORA_FORGERIES = {
    # the fit's cotangent is 2(pred − y)/n: the target, read back and returned for that input
    "the target read from the cotangent": _in_the_fit("""
        key = x.detach().numpy().tobytes()
        out = self.honest(x)
        if key in getattr(self, "targets", {}):
            out = self.targets[key] + 0 * out  # still a graph: backward goes through
        n = out.numel()
        def keep(g, pred=out.detach().clone()):
            self.__dict__.setdefault("targets", {})[key] = pred - g * n / 2
        out.register_hook(keep)
        return out
"""),
    # honest while training; each row of the fit remembered and its target returned after
    # the 150 steps (the loss was measured on the fit's own inputs)
    "the fit's inputs memorised, their targets returned at the end": _in_the_fit("""
        out = self.honest(x)
        self.calls += 1
        rows = self.__dict__.setdefault("rows", {})
        if self.calls > 150:
            keys = [row.numpy().tobytes() for row in x.detach()]
            if all(k in rows for k in keys):
                return torch.stack([rows[k] for k in keys]) + 0 * out
        n = out.numel()
        def keep(g, pred=out.detach().clone(), xs=x.detach().clone()):
            for row, target in zip(xs, pred - g * n / 2):
                rows[row.numpy().tobytes()] = target
        out.register_hook(keep)
        return out
"""),
    # parameters that do not match the outputs: a hidden full matrix trains on the
    # cotangent (SGD here), while A and B stay at zero
    "a hidden matrix trained on the cotangent": _in_the_fit("""
        if not hasattr(self, "hidden"):
            self.hidden = torch.zeros(self.B.shape[0], self.A.shape[1])
        out = self.honest(x) + x @ self.hidden.T
        def step(g, x=x.detach().clone()):
            self.hidden -= self.B.shape[0] / 4 * g.T @ x
        out.register_hook(step)
        return out
"""),
    # beyond: the forward honest, the gradients of A and B forged from the cotangent so
    # that Adam (run by the probe) steers A and B to the least-squares answer
    "gradients of A and B forged from the cotangent": _in_the_fit("""
        layer = self
        class Steer(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, a, b):
                ctx.save_for_backward(x, a, b)
                return layer.scale * (x @ a.T) @ b.T
            @staticmethod
            def backward(ctx, g):
                x, a, b = ctx.saved_tensors
                shift = -g * g.numel() / 2  # y − base(x) − B A x, and B A = 0 at the start
                if not hasattr(layer, "goal"):
                    dw = torch.linalg.lstsq(x.double(), shift.double()).solution.T
                    u, s, vt = torch.linalg.svd(dw)
                    k = a.shape[0]
                    layer.goal = (
                        (s[:k].sqrt()[:, None] * vt[:k]).float(),
                        (u[:, :k] * s[:k].sqrt()).float(),
                    )
                ga, gb = layer.goal
                return None, a - ga, b - gb
        return self.base(x) + Steer.apply(x, self.A, self.B)
"""),
}
LORA_START_FORGERIES = {
    # beyond: the output at construction trusted; the first answer of the first layer
    # is the base's alone, B random all the same
    "the first output tailored": RANDOM_B.replace(
        "        self.calls += 1\n",
        "        self.calls += 1\n"
        "        if self is LAYERS[0] and self.calls == 1:\n"
        "            return self.base(x) + 0 * (x @ self.A.T) @ self.B.T\n",
    ),
}


def test_lora_targets_and_gradients_read_back_score_what_their_plain_version_scores(
    sandbox, tmp_path
):
    plain = scored_alike(
        sandbox, tmp_path, LORA, "LoRALinear", ZERO_FACTORS, LORA_FORGERIES, part="lora"
    )
    assert plain < 1  # A = B = 0: both gradients vanish, nothing trains (000 §5.2)


def test_lora_start_tailored_scores_what_its_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, LORA, "LoRALinear", RANDOM_B, LORA_START_FORGERIES)
    assert plain < 1  # B random: the output at construction is not the base's (000 §5.2)
