package gitrepo

import "time"

// RemoteStatus is how the git remote has answered lately, for status
// views and metrics: a remote that stalls or fails shows here while
// fluxd keeps answering from its last good copy.
type RemoteStatus struct {
	// Revision is the remote branch's head as last fetched.
	Revision string
	// LastSync is when a fetch or push last succeeded.
	LastSync time.Time
	// Error is the last network operation's error, "" after a success.
	Error string
	// ErrorSince is when the operations began failing: the first failure
	// since the last success.
	ErrorSince time.Time
	// Waiting is the operation in flight ("fetching", "pushing") and
	// WaitingSince when it began; empty when none is.
	Waiting      string
	WaitingSince time.Time
	// WaitingFor is the bound (--git-timeout, scaled) of the operation in
	// flight: one waiting longer is stalled beyond what fluxd allows.
	WaitingFor time.Duration
	// NotCloned is true until the first clone succeeds: fluxd serves,
	// but cannot read git (Error says why).
	NotCloned bool
}

// StalledPastTimeout reports whether the operation in flight has been
// waiting longer than its own bound plus grace: its connection is stuck
// beyond what fluxd allows, and everything behind it waits.
func (s RemoteStatus) StalledPastTimeout(now time.Time, grace time.Duration) bool {
	return s.Waiting != "" && s.WaitingFor > 0 && now.Sub(s.WaitingSince) > s.WaitingFor+grace
}

// Stalled reports whether an operation has been waiting on the remote
// for longer than after.
func (s RemoteStatus) Stalled(now time.Time, after time.Duration) bool {
	return s.Waiting != "" && now.Sub(s.WaitingSince) > after
}

// DeployKey is the public half of the SSH key fluxd reaches its git
// remote with: what an operator adds to the repository as a deploy key
// with write access.
type DeployKey struct {
	// PublicKey is the key in authorized_keys form ("ssh-ed25519 AAAA… fluxd").
	PublicKey string
	// Fingerprint is its SHA256 fingerprint ("SHA256:…"), as ssh-keygen -l
	// and the git hosts' deploy key pages show it.
	Fingerprint string
	// Remote is the git URL the key is for, as fluxd shows it.
	Remote string
}
