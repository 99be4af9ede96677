package webhook

import (
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/clientkey"
)

// signed is how a webhook's sender proves itself, and the limits on the
// signed bodies read before the proof is checked: the registry
// notifications' (Handler) and CI's approvals' (Approvals) alike, one
// secret each.
type signed struct {
	// RequireTimestamp refuses signed requests without a signed
	// X-Fluxd-Timestamp, which could be replayed forever. Set before
	// serving. (Approvals always require one.)
	RequireTimestamp bool
	// TrustedProxies are the proxies in front of the listener (an
	// Ingress: registries and CI must reach it) whose X-Forwarded-For
	// names the sender, for the per-sender share of signed reads
	// (--trusted-proxies). Empty: the connection's address. Set before
	// serving.
	TrustedProxies clientkey.Proxies

	secret []byte
	// now is the clock for signed timestamps.
	now func() time.Time

	// readsMu guards the counts below. signedReads counts the signed
	// bodies being read, and readsFrom counts them by sender
	// (clientkey), so that one sender cannot take every slot from
	// genuine ones. signers are the senders whose signature was valid
	// lately: they may use the slots kept for them, which a flood of
	// unknown senders cannot take (limits.go).
	readsMu     sync.Mutex
	signedReads int
	readsFrom   map[string]int
	signers     *clientkey.Recent
}

func newSigned(secret []byte) *signed {
	return &signed{secret: secret, now: time.Now, readsFrom: map[string]int{}, signers: clientkey.NewRecent(maxSigners, signerMemory)}
}
