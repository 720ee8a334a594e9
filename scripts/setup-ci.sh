#!/usr/bin/env bash
# System packages worldmesh's tests need, installed by the project itself (CI calls this from
# .ci/run before the tests; developers run it once). Idempotent: a package already present is
# not touched, and `apt-get update` runs at most once, only when something must be installed.
#
# Packages:
#   chromium  headless browser for the dashboard's browser test (crates/cli/tests/dashboard_browser.rs)
#   iproute2  `ip netns` / veth pairs for the multi-host test (crates/cli/tests/netns.rs)
#   nftables  `nft` drop rules (loss, partitions) in that test
set -euo pipefail

# Each entry: "<command that proves it is installed>:<Debian package>".
needed=(
  "/usr/bin/chromium:chromium"
  "/usr/sbin/ip:iproute2"
  "/usr/sbin/nft:nftables"
)

missing=()
for entry in "${needed[@]}"; do
  probe=${entry%%:*}
  pkg=${entry#*:}
  if [ -x "$probe" ]; then
    echo "setup-ci: $pkg present ($probe)"
  else
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-ci: missing ${missing[*]} and no apt-get on this machine: install them by hand" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "setup-ci: missing ${missing[*]}; run this script as root (apt-get install needs it)" >&2
    exit 1
  fi
fi
echo "setup-ci: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
for entry in "${needed[@]}"; do
  probe=${entry%%:*}
  if [ ! -x "$probe" ]; then
    echo "setup-ci: ${entry#*:} installed but $probe is still missing" >&2
    exit 1
  fi
done
echo "setup-ci: done"
