#!/usr/bin/env bash
# Build a grading image with whichever container engine is here: docker when its daemon
# answers, else podman (daemonless).  What `make image` and `make image-cuda` run.
#
#   docker/build.sh cpu|cuda [--engine auto|docker|podman] [--base IMAGE|local]
#                            [--tag TAG] [--torch-wheel FILE]
#
#   --base IMAGE      the base (default: the Dockerfile's, python:3.12-slim-bookworm);
#                     local: one made here from Debian's packages (docker/base.sh), for
#                     hosts that cannot pull from a public registry
#   --torch-wheel F   install torch from this wheel (podman: mounted into the build), not
#                     from an index: a host's own copy of the pinned CPU build
#   $SCALEGRADE_PODMAN_ARGS  podman's global flags on this host (e.g. --runtime runc
#                     --cgroup-manager cgroupfs where crun refuses hybrid cgroups)
#   $PIP_CERT         a CA bundle the build's pip needs (a TLS-inspecting network):
#                     podman mounts it into the build
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
die() { echo "build.sh: $*" >&2; exit 2; }

kind="${1:-}"
case "$kind" in cpu) dockerfile="$here/Dockerfile" ;; cuda) dockerfile="$here/Dockerfile.cuda" ;;
    *) die "say which image: cpu or cuda" ;; esac
shift
engine=auto base="" tag="scalegrade/grader:$kind" wheel=""
while [ $# -gt 0 ]; do
    case "$1" in
        --engine) engine="${2:?--engine needs auto, docker or podman}"; shift 2 ;;
        --base) base="${2?--base needs an image or local}"; shift 2 ;;
        --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
        --torch-wheel) wheel="${2?--torch-wheel needs a file}"; shift 2 ;;
        *) die "unknown option $1" ;;
    esac
done

docker_answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
if [ "$engine" = auto ]; then
    if docker_answers; then engine=docker
    elif command -v podman >/dev/null 2>&1; then engine=podman
    else die "no container engine: install podman (apt-get install podman) or docker, with its daemon running"
    fi
fi
case "$engine" in
    docker) docker_answers || die "docker's daemon does not answer (start it, or --engine podman)"
            run=(docker) ;;
    podman) command -v podman >/dev/null 2>&1 || die "podman is not installed (apt-get install podman)"
            # shellcheck disable=SC2206  # the global flags are words
            run=(podman ${SCALEGRADE_PODMAN_ARGS:-}) ;;
    *) die "--engine takes auto, docker or podman, not '$engine'" ;;
esac

args=(build -f "$dockerfile" -t "$tag")
if [ "$base" = local ]; then
    base=localhost/scalegrade-base:bookworm
    "${run[@]}" image exists "$base" 2>/dev/null || "${run[@]}" image inspect "$base" >/dev/null 2>&1 \
        || bash "$here/base.sh" "${run[*]}" "$base"
fi
[ -n "$base" ] && args+=(--build-arg "BASE=$base")
if [ "$engine" = podman ]; then
    # the build's processes: podman's default rlimits are above what some hosts grant
    args+=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --network host)
    if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
        args+=(--volume "$PIP_CERT:/etc/ssl/certs/host-ca.crt:ro"
               --build-arg PIP_CERT=/etc/ssl/certs/host-ca.crt)
    fi
fi
if [ -n "$wheel" ]; then
    [ -f "$wheel" ] || die "$wheel: no such wheel"
    [ "$engine" = podman ] || die "--torch-wheel needs podman (docker build cannot mount it)"
    wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
    args+=(--volume "$(dirname "$wheel"):/wheels:ro" --build-arg "TORCH=/wheels/$(basename "$wheel")"
           --build-arg TORCH_INDEX_URL=)
fi
echo "build.sh: ${run[*]} ${args[*]} $repo" >&2
"${run[@]}" "${args[@]}" "$repo"
echo "build.sh: built $tag with $engine"
