#!/usr/bin/env bash
# Podman for container attempts ([runner] environment = "container"; docs/containers.md), and the offline
# base images task Dockerfiles start FROM. Idempotent: installs only what is missing, builds the base image
# once (its rootfs tarball is cached in /var/cache/harnessrl between runs).
#
#   bash scripts/podman.sh     # as root (or with sudo)
#
# What these machines need (DESIGN.md, "Facts"): runc (crun refuses their hybrid cgroups) and ulimits at or
# below the host's (no CAP_SYS_RESOURCE), set for every container in a containers.conf drop-in; and no public
# image registry is reachable, so the base image is made from Debian's packages (mmdebstrap) and tagged with
# the names the example tasks use (python:3.11-slim, debian:bookworm-slim), so `podman build --pull=never`
# works offline.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "podman.sh: need root (or sudo) to install podman" >&2; exit 1; }
  SUDO="sudo"
fi
missing=()
for tool in podman runc slirp4netns mmdebstrap; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "podman.sh: installing Debian's ${missing[*]}" >&2
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    podman runc slirp4netns mmdebstrap uidmap >&2
fi
conf=/etc/containers/containers.conf.d/harnessrl.conf
if [ ! -f "$conf" ]; then
  $SUDO mkdir -p "$(dirname "$conf")"
  printf '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
    | $SUDO tee "$conf" >/dev/null
fi
base=localhost/harnessrl-base:bookworm
if ! $SUDO podman image exists "$base"; then
  cache=/var/cache/harnessrl/bookworm.tar
  if [ ! -s "$cache" ]; then
    echo "podman.sh: making the base image from Debian's packages (mmdebstrap, ~30-80 s)" >&2
    $SUDO mkdir -p "$(dirname "$cache")"
    $SUDO mmdebstrap --quiet --variant=minbase --include=python3,git,ca-certificates bookworm "$cache.tmp" >&2
    $SUDO mv "$cache.tmp" "$cache"
  fi
  $SUDO podman import "$cache" "$base" >/dev/null
fi
for name in docker.io/library/python:3.11-slim docker.io/library/debian:bookworm-slim; do
  $SUDO podman image exists "$name" || $SUDO podman tag "$base" "$name"
done
if ! out=$($SUDO podman run --rm --network none "$base" python3 -c 'print("ok")' 2>&1) || [ "$out" != "ok" ]; then
  echo "podman.sh: podman is installed but cannot run a container here: $out" >&2
  exit 1
fi
echo "podman.sh: $(podman --version), base image $base ready" >&2
