#!/usr/bin/env bash
# deps.sh installs the Debian packages fluxd's stack and tests need, when
# they are missing: git (the manifests remote and the second git client)
# and gcc (cgo, for SQLite).
set -euo pipefail
missing=()
command -v git >/dev/null || missing+=(git)
command -v gcc >/dev/null || missing+=(gcc)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
$sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
