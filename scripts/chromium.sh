#!/usr/bin/env bash
# Chromium for the dashboard's browser tests (Playwright drives /usr/bin/chromium; `playwright install`
# cannot download on these machines). Idempotent: does nothing when chromium is already installed.
#
#   bash scripts/chromium.sh        # install Debian's chromium if /usr/bin/chromium is missing
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium.sh: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "chromium.sh: need root (or sudo) to apt-get install chromium" >&2; exit 1; }
  SUDO="sudo"
fi
echo "chromium.sh: installing Debian's chromium" >&2
$SUDO apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium >&2
/usr/bin/chromium --version >&2
