#!/usr/bin/env bash
# deps.sh installs the Debian packages fluxd's stack and tests need, when
# they are missing: git (the manifests remote and the second git client),
# gcc (cgo, for SQLite), docker-registry (the CNCF distribution registry,
# the stack's registry that requires authentication) and apache2-utils
# (htpasswd, for that registry's bcrypt password file) and openssh-server
# (sshd with git-shell, the SSH git remote of the deploy-key tests; it
# brings ssh-keygen and ssh-keyscan), postgresql (the server binaries
# the PostgreSQL store's tests and 'make up DB=postgres' start) and
# chromium (headless, the browser the status page's end-to-end tests drive),
# containerd, runc and containernetworking-plugins (the stack's real node:
# a kubelet on containerd with a CNI bridge), and prometheus (the real
# server the promotion gates' prometheus check is tested against).
set -euo pipefail
missing=()
command -v git >/dev/null || missing+=(git)
command -v gcc >/dev/null || missing+=(gcc)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v htpasswd >/dev/null || missing+=(apache2-utils)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v chromium >/dev/null || missing+=(chromium)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v prometheus >/dev/null || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
