#!/usr/bin/env bash
# make test: every package's tests, on the real local stack. The end-to-end
# tests (./e2e) run as SHARDS processes side by side, each on a stack of its
# own (hack/e2eshard deals the tests out by e2e/testdata/durations.tsv); the
# other packages run in one go test beside them. Then each package's (and
# shard's) time, slowest first, and the 15 slowest end-to-end tests. The
# whole output is kept in .bin/test.log; the exit status is go test's: not
# zero when a package or a shard fails.
#
#   PKGS    the packages (default ./...): PKGS=./web, PKGS='./e2e ./web'
#   SHARDS  how many end-to-end processes (default 3; 1: one, as go test runs it)
set -uo pipefail
cd "$(dirname "$0")/.."
e2e=github.com/fluxd/fluxd/e2e
mkdir -p .bin
bin=$(stack/build.sh) || exit 1
export FLUXD_STACK_BIN=$bin
# shellcheck disable=SC2086 # PKGS is a list of patterns
list=$(go list ${PKGS:-./...}) || exit 1
rest=$(grep -vx "$e2e" <<<"$list")
rm -f .bin/e2e-durations.tsv .bin/e2e-durations-shard*.json

run() {
	local rc=0 e2e_pid=
	if grep -qx "$e2e" <<<"$list"; then
		# Compiled once: the test binary, fluxd and fluxctl (shared by the
		# shards, FLUXD_E2E_BIN) and the runner.
		(
			rm -rf .bin/e2e-bin && mkdir -p .bin/e2e-bin &&
				go test -c -o .bin/e2e.test ./e2e &&
				go build -o .bin/e2e-bin/fluxd ./cmd/fluxd &&
				go build -o .bin/e2e-bin/fluxctl ./cmd/fluxctl &&
				go build -o .bin/e2eshard ./hack/e2eshard || {
				printf 'FAIL\t%s [build failed]\n' "$e2e"
				exit 1
			}
			.bin/e2eshard -bin .bin/e2e.test -dir e2e -pkg "$e2e" -shards "${SHARDS:-3}" \
				-durations e2e/testdata/durations.tsv -measured .bin/e2e-durations.tsv \
				-fluxd-bin "$PWD/.bin/e2e-bin" -timeout 75m
		) &
		e2e_pid=$!
	fi
	if [ -n "$rest" ]; then
		# shellcheck disable=SC2086 # one package a word
		go test -count=1 -timeout 75m $rest || rc=1
	fi
	if [ -n "$e2e_pid" ]; then
		wait "$e2e_pid" || rc=1
	fi
	return $rc
}

run 2>&1 | tee .bin/test.log
rc=${PIPESTATUS[0]}
echo "== packages by time, slowest first (an end-to-end shard is e2e[i/n])"
awk '($1 == "ok" || $1 == "FAIL") && $3 ~ /^[0-9.]+s$/ {printf "%10s  %s\n", $3, $2}' .bin/test.log | sort -rn
if [ -s .bin/e2e-durations.tsv ]; then
	echo "== end-to-end tests by time, the 15 slowest (all in .bin/e2e-durations.tsv; make e2e-durations keeps them as the table the shards are dealt by)"
	grep -v '^#' .bin/e2e-durations.tsv | sort -t "$(printf '\t')" -k2 -rn | head -15 | awk -F '\t' '{printf "%9.1fs  %s\n", $2, $1}'
fi
exit "$rc"
