"""The GPU checks: one script a GPU machine runs in well under 5 minutes.

    python3 bench/gpu_check.py                  # a GPU machine: cuda, NCCL for the ring
    python3 bench/gpu_check.py --device cpu     # anywhere: the same checks, gloo for the ring

It needs the repository, numpy and torch (the CUDA image has both, and so does a plain
PyTorch machine): nothing of the sandbox, since what it runs is the bank's own reference
code, never a student's.

1. **The DPO loss and the speculative sampler.**  Each question's checks (``probe`` then
   ``grade``, through :func:`autograder.grading.checks.run_locally`, the wire a student's function
   is called over) grade code that computes on DEVICE, and the same code on the CPU, for
   ``--seeds`` grading seeds.  Every property's score must be the same on both, and full
   marks, as the reference earns on the CPU.
   - DPO: the bank's solution, its tensors moved to DEVICE and its loss back (autograd
     carries the gradients through the moves);
   - the sampler: ``speculative_step`` written with torch, the accept test and the
     residual's inverse-CDF lookup in DEVICE tensors of the uniforms the given generator
     draws (the drafts are the checks' own).
2. **The ring all-reduce over torch.distributed.**  ``--world`` processes, each rank on GPU
   ``rank % count`` over NCCL (so two ranks share one GPU where there is one), or on the
   CPU over gloo; the bank's solution, with ``comm.send_recv`` an isend/irecv pair of
   DEVICE tensors.  Every rank must hold the exact sum.  Where NCCL refuses two ranks on
   one GPU, its reason is printed and the ring counts as not run, not as failed.
3. **The time of each**, per device.

Exit status 0 when every check that ran agreed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from autograder.grading.checks import run_locally  # noqa: E402

DPO = ROOT / "templates" / "posttraining" / "dpo-loss-code"
SAMPLER = ROOT / "templates" / "serving" / "speculative-sampler-code"
RING = ROOT / "templates" / "collectives" / "ring-allreduce-code"


def solution(folder: Path):
    """The question's reference solution, a module of its own."""
    spec = importlib.util.spec_from_file_location(f"solution_{folder.name}", folder / "solution.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- 1. the checks, on a device and on the CPU -------------------------------------------


def dpo_on(device: str):
    """The bank's DPO loss, computed on ``device``."""
    reference = solution(DPO).dpo_loss

    def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
                 ref_rejected_logps, beta):  # fmt: skip
        moved = [t.to(device) for t in (policy_chosen_logps, policy_rejected_logps,
                                        ref_chosen_logps, ref_rejected_logps)]  # fmt: skip
        return reference(*moved, beta).to("cpu")

    return dpo_loss


def sampler_on(device: str):
    """Speculative sampling written with torch on ``device``: the draft's acceptance and
    the residual's token, each from one uniform of ``rng``."""

    def speculative_step(p, q, x, rng):
        p_t = torch.as_tensor(p, dtype=torch.float64, device=device)
        q_t = torch.as_tensor(q, dtype=torch.float64, device=device)
        u = torch.tensor(rng.random(2), dtype=torch.float64, device=device)

        def draw(weights, uniform):
            cdf = torch.cumsum(weights / weights.sum(), 0)
            return torch.searchsorted(cdf, uniform.reshape(1)).clamp(max=len(cdf) - 1)[0]

        draft = torch.tensor(int(x), device=device)
        accept = u[0] < torch.clamp(p_t[draft] / q_t[draft], max=1.0)
        residual = torch.clamp(p_t - q_t, min=0.0)
        token = torch.where(accept, draft, draw(residual, u[1]))
        token, accept = torch.stack([token, accept.to(token.dtype)]).tolist()
        return int(token), bool(accept)

    return speculative_step


def graded(folder: Path, fn, seed: int) -> tuple[list[tuple[str, float]], float]:
    """(each property's name and score, seconds) of ``fn`` under the question's checks."""
    start = time.perf_counter()
    props = run_locally(folder / "checks.py", fn, seed, {})
    return [(p["name"], round(p["score"], 12)) for p in props], time.perf_counter() - start


def check_question(name: str, folder: Path, make, device: str, seeds: list[int]) -> bool:
    agreed = True
    seconds = {f"on {device} (the device)": 0.0, "on cpu": 0.0}
    for seed in seeds:
        on_device, seconds_device = graded(folder, make(device), seed)
        on_cpu, seconds_cpu = graded(folder, make("cpu"), seed)
        seconds[f"on {device} (the device)"] += seconds_device
        seconds["on cpu"] += seconds_cpu
        full = all(score == 1.0 for _, score in on_cpu)
        if on_device != on_cpu or not full:
            agreed = False
            print(f"  {name}, seed {seed}: {device} {on_device} != cpu {on_cpu} (or not full)")
    verdict = "the same grade, full marks" if agreed else "DIFFERENT"
    timing = ", ".join(f"{where} {1000 * s / len(seeds):.0f} ms" for where, s in seconds.items())
    print(f"{name}, {len(seeds)} seeds: {verdict}; per seed {timing}")
    return agreed


# --- 2. the ring over torch.distributed ---------------------------------------------------


class DeviceComm:
    """``comm.send_recv`` over torch.distributed: this rank's chunk to rank + 1 and rank
    − 1's to this one, as one isend/irecv pair of ``device`` tensors."""

    def __init__(self, rank: int, world: int, device: str):
        self.rank, self.world, self.device = rank, world, device
        self.calls = 0

    def send_recv(self, chunk):
        import torch.distributed as dist

        self.calls += 1
        out = torch.as_tensor(np.asarray(chunk, dtype=np.float64), device=self.device)
        into = torch.empty_like(out)
        ops = [
            dist.P2POp(dist.isend, out, (self.rank + 1) % self.world),
            dist.P2POp(dist.irecv, into, (self.rank - 1) % self.world),
        ]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        return into.cpu().numpy()


def ring_rank(rank: int, world: int, port: int, device: str, n: int, results) -> None:
    """One rank: join the group, run the bank's ring twice (the second one timed)."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        if device == "cuda":
            here = f"cuda:{rank % torch.cuda.device_count()}"
            torch.cuda.set_device(here)
            dist.init_process_group(
                "nccl", rank=rank, world_size=world, device_id=torch.device(here)
            )
        else:
            here = "cpu"
            dist.init_process_group("gloo", rank=rank, world_size=world)
        ring = solution(RING).ring_allreduce
        x = np.random.default_rng([rank, 7]).standard_normal(n)
        comm = DeviceComm(rank, world, here)
        ring(x, rank, world, comm)  # the first: connections made, kernels loaded
        start = time.perf_counter()
        out = ring(x, rank, world, comm)
        seconds = time.perf_counter() - start
        want = np.sum([np.random.default_rng([r, 7]).standard_normal(n) for r in range(world)], 0)
        results.put((rank, bool(np.allclose(out, want, rtol=0, atol=1e-9)), seconds, None))
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - reported by the parent
        results.put((rank, False, 0.0, traceback.format_exc()[-1500:]))


def check_ring(device: str, world: int, n: int) -> bool | None:
    """True: every rank summed exactly; False: wrong; None: the backend refused to run."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    results = context.Queue()
    procs = [context.Process(target=ring_rank, args=(r, world, port, device, n, results))
             for r in range(world)]  # fmt: skip
    for proc in procs:
        proc.start()
    got = []
    for _ in procs:
        try:
            got.append(results.get(timeout=120))
        except Exception:  # noqa: BLE001 - a rank that hung or died
            break
    for proc in procs:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    backend = "NCCL" if device == "cuda" else "gloo"
    errors = [e for _, _, _, e in got if e]
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    where = f"{world} ranks on {gpus} GPU(s)" if device == "cuda" else f"{world} CPU ranks"
    if errors or len(got) < world:
        reason = errors[0].strip().splitlines()[-1] if errors else "a rank did not answer"
        print(f"ring all-reduce over {backend}, {where}: not run: {reason}")
        return None
    exact = all(ok for _, ok, _, _ in got)
    slowest = max(seconds for _, _, seconds, _ in got)
    mb = 8 * n / 1e6
    print(f"ring all-reduce over {backend}, {where}, {mb:.0f} MB per rank: "
          f"{'the exact sum on every rank' if exact else 'WRONG'}; "
          f"{1000 * slowest:.1f} ms, {2 * (world - 1) / world * mb / slowest / 1e3:.2f} GB/s "
          f"per rank")  # fmt: skip
    return exact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--ring-elements", type=int, default=1 << 22)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here (torch.cuda.is_available() is False); try --device cpu")
        return 2
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"NCCL {torch.cuda.nccl.version() if torch.version.cuda else None}, "
          f"device {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}")  # fmt: skip
    seeds = [1000 + 17 * i for i in range(args.seeds)]
    start = time.perf_counter()
    ok = check_question("DPO loss", DPO, dpo_on, args.device, seeds)
    ok &= check_question("speculative sampler", SAMPLER, sampler_on, args.device, seeds)
    world = args.world
    n = args.ring_elements // world * world
    ring = check_ring(args.device, world, n)
    print(f"all in {time.perf_counter() - start:.1f} s")
    return 0 if ok and ring is not False else 1


if __name__ == "__main__":
    sys.exit(main())
