#!/usr/bin/env bash
# A base image made from Debian's own packages, for hosts that cannot pull from a public
# registry: debootstrap's minbase of bookworm with python3 (3.11), its venv module and pip,
# imported into the container engine.  Root and Debian's debootstrap are needed.
#
#   docker/base.sh ENGINE [TAG]     ENGINE: docker or podman (with its global flags after
#                                   it, quoted); TAG default localhost/scalegrade-base:bookworm
set -euo pipefail

engine="${1:?docker/base.sh needs the engine (docker or podman)}"
tag="${2:-localhost/scalegrade-base:bookworm}"
die() { echo "base.sh: $*" >&2; exit 2; }

command -v debootstrap >/dev/null 2>&1 \
    || die "debootstrap is not installed (apt-get install debootstrap), or pass BASE=IMAGE"
[ "$(id -u)" = 0 ] || die "debootstrap needs root"
root="$(mktemp -d /var/tmp/scalegrade-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip \
    bookworm "$root" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# shellcheck disable=SC2086  # the engine's global flags are words
tar -C "$root" -c . | $engine import - "$tag" >/dev/null
echo "base.sh: $tag (Debian bookworm minbase, $("$root"/usr/bin/python3 --version 2>/dev/null || echo python3))"
