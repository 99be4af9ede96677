// Package sshserver prepares Debian's OpenSSH server (openssh-server, see
// hack/deps.sh) to serve git repositories on a loopback port, for tests
// and the local stack: a real SSH peer for fluxd's deploy-key path.
//
// Everything it needs lives in one directory: its own ed25519 host key,
// its sshd_config, an authorized_keys file whose every key may run only
// git-shell, and the known_hosts line ssh-keyscan reads back. sshd itself
// insists on two things outside it: it runs as root (to log the client
// in as the user it names, here root, whose login shell never runs:
// every key is forced through git-shell), and its privilege separation
// directory /run/sshd exists (compiled in; Prepare creates it).
//
// The caller starts the process (Command) the way it starts its others,
// then waits for Ready.
package sshserver
