#!/usr/bin/env bash
# Install ScaleGrade: the pinned torch first, then the package.  The one install path of
# `make venv` (hence `make test`, `make demo` and CI's .ci/run) and of both grading images
# (docker/Dockerfile, docker/Dockerfile.cuda).  Idempotent: an existing venv is reused and
# pip leaves what is already satisfied alone.
#
#   docker/install.sh [--venv DIR] [--python PY] [--torch SPEC] [--torch-index URL]
#                     [--extras LIST] [--editable] [--require cpu|cuda] [--no-bank] [SOURCE]
#
#   --venv DIR         create (if missing) and install into this virtual environment;
#                      without it, into PY's own environment
#   --python PY        the interpreter that creates the venv (default: python3)
#   --torch SPEC       the torch requirement (default: torch==2.13.0), installed before
#                      anything that depends on torch, so nothing pulls another build
#   --torch-index URL  the index torch comes from: https://download.pytorch.org/whl/cpu
#                      for the CPU build, .../whl/cu130 and the like for a CUDA build;
#                      default: pip's own configuration (PyPI's Linux wheel is CUDA-enabled)
#   --extras LIST      ScaleGrade's extras, comma-separated (dev, dask, postgres)
#   --editable         pip install -e (a working copy); default: a regular install
#   --require cpu|cuda fail unless torch is that build (cuda: with NCCL)
#   --no-bank          remove the question bank the package installs (scalegrade/bank/:
#                      reference solutions and checks): a grading image grades from keys/
#                      alone, and student code runs there
#   SOURCE             the ScaleGrade source tree (default: this script's repository)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(dirname "$here")"
venv=""
python="python3"
torch_spec="torch==2.13.0"
torch_index=""
extras=""
editable=0
require=""
no_bank=0

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "install.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --venv) venv="${2:?--venv needs a folder}"; shift 2 ;;
        --python) python="${2:?--python needs an interpreter}"; shift 2 ;;
        --torch) torch_spec="${2:?--torch needs a requirement}"; shift 2 ;;
        --torch-index) torch_index="${2?--torch-index needs a URL (or '')}"; shift 2 ;;
        --extras) extras="${2?--extras needs a list (or '')}"; shift 2 ;;
        --editable) editable=1; shift ;;
        --require) require="${2:?--require needs cpu or cuda}"; shift 2 ;;
        --no-bank) no_bank=1; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) source_dir="$1"; shift ;;
    esac
done
case "$require" in "" | cpu | cuda) ;; *) die "--require takes cpu or cuda, not '$require'" ;; esac
[ -f "$source_dir/pyproject.toml" ] || die "$source_dir has no pyproject.toml (pass SOURCE)"

# an image build passes PIP_CERT (a CA bundle) only where its network needs one
[ -n "${PIP_CERT:-}" ] || unset PIP_CERT

if [ -n "$venv" ]; then
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    py="$venv/bin/python"
else
    py="$python"
fi
pip=("$py" -m pip)

"${pip[@]}" install --quiet --upgrade pip

# torch first: the pinned build from the chosen index, so that nothing below pulls another.
if [ -n "$torch_index" ]; then
    "${pip[@]}" install --quiet --index-url "$torch_index" "$torch_spec"
else
    "${pip[@]}" install --quiet "$torch_spec"
fi

target="$source_dir"
[ -n "$extras" ] && target="$source_dir[$extras]"
if [ "$editable" = 1 ]; then
    "${pip[@]}" install --quiet -e "$target"
    # Bytecode for the sources, as pip writes it for an installed package: where
    # PYTHONDONTWRITEBYTECODE is set (CI images), every command would compile them again.
    (cd "$source_dir" && "$py" -m compileall -q -j 0 autograder contract costmodel generator scalegrade >/dev/null)
else
    "${pip[@]}" install --quiet "$target"
fi

if [ "$no_bank" = 1 ]; then
    [ "$editable" = 1 ] && die "--no-bank removes installed files: not with --editable"
    "$py" -c 'import os, shutil, scalegrade
shutil.rmtree(os.path.join(os.path.dirname(scalegrade.__file__), "bank"), ignore_errors=True)'
fi

# What was installed, and (with --require) whether it is the build the image promises.
"$py" - "$require" <<'EOF'
import sys

import torch
import torch.distributed as dist
from importlib.metadata import version

require = sys.argv[1]
cuda = torch.version.cuda
nccl = dist.is_available() and dist.is_nccl_available()
print(
    f"install.sh: scalegrade {version('scalegrade')}, torch {torch.__version__} "
    f"(CUDA {cuda or 'none'}, NCCL {'yes' if nccl else 'no'}), python {sys.version.split()[0]}"
)
if require == "cpu" and cuda:
    sys.exit(f"install.sh: expected torch's CPU build, got CUDA {cuda}")
if require == "cuda" and not (cuda and nccl):
    sys.exit("install.sh: expected torch's CUDA build with NCCL (pass --torch-index)")
EOF
