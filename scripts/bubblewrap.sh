#!/usr/bin/env bash
# Bubblewrap, the sandbox of local attempts ([runner] sandbox; docs/security.md), and what the red-team and
# sandbox tests need. Idempotent: does nothing when a working bwrap is already installed.
#
#   bash scripts/bubblewrap.sh        # apt-get install Debian's bubblewrap if bwrap is missing
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
  echo "bubblewrap.sh: $(bwrap --version) already installed" >&2
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "bubblewrap.sh: need root (or sudo) to apt-get install bubblewrap" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "bubblewrap.sh: installing Debian's bubblewrap" >&2
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends bubblewrap >&2
fi
# A sandbox needs user (or, as root, mount/pid/net) namespaces: say so now rather than in every attempt.
if ! bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true 2>/dev/null; then
  echo "bubblewrap.sh: bwrap is installed but cannot create namespaces here (containers may forbid it);" \
       "attempts will run unsandboxed (sandbox = \"auto\") or refuse to start (sandbox = \"bubblewrap\")" >&2
fi
