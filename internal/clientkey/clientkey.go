// Package clientkey names the client a connection or a request comes
// from, for every per-client limit of fluxd: the gRPC API's connections,
// the status page's failed sign-ins and the webhook listener's signed
// reads. All three key clients the same way.
//
// A client is an IPv4 address, or an IPv6 address's /64: one host
// commonly holds a whole /64, so addresses rotated within it must not
// buy fresh allowances. Behind proxies the operator trusts
// (--trusted-proxies), an HTTP request's client is read from its
// X-Forwarded-For, from the right, past every trusted proxy.
//
// Limits.Get keeps a rate limiter per client in a table of bounded size
// that forgets the client seen least recently when it is full, never
// everyone at once.
package clientkey

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// Of is the key of a client at addr: the IPv4 address (an IPv4-mapped
// IPv6 address is its IPv4 one), or the IPv6 address's /64. It is "" for
// an invalid address.
func Of(addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// OfAddr is the key of a connection's peer, or "" when it is not an IP
// address (a Unix socket, an in-memory pipe).
func OfAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	return Of(addrOf(a.String()))
}

// addrOf is the IP address of host:port, or of a bare address.
func addrOf(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a
	}
	return netip.Addr{}
}

// Proxies are the proxies (an Ingress controller's pods, a load
// balancer) whose X-Forwarded-For names the client. Empty: the
// connection's address, and no header, is believed.
type Proxies []netip.Prefix

// ParseProxies parses --trusted-proxies: CIDRs or single addresses.
func ParseProxies(list []string) (Proxies, error) {
	var out Proxies
	var errs []error
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
			}
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		errs = append(errs, fmt.Errorf("--trusted-proxies: %q is neither a CIDR (10.0.0.0/8) nor an address (10.0.0.7)", s))
	}
	return out, errors.Join(errs...)
}

// Trusted says whether addr is one of the proxies.
func (p Proxies) Trusted(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, pr := range p {
		if pr.Contains(addr) {
			return true
		}
	}
	return false
}

// TrustedAddr says whether a connection's peer is one of the proxies.
func (p Proxies) TrustedAddr(a net.Addr) bool {
	return a != nil && p.Trusted(addrOf(a.String()))
}

// Client is the address a request comes from: the connection's, unless
// that is a trusted proxy, whose X-Forwarded-For is then read from the
// right, past every trusted proxy, to the first address none of them
// has: the client's as the outermost trusted proxy saw it. What a client
// wrote itself further left is never believed. A malformed hop stops
// the walk at the last trusted proxy's address.
func (p Proxies) Client(r *http.Request) netip.Addr {
	peer := addrOf(r.RemoteAddr)
	if !p.Trusted(peer) {
		return peer.Unmap()
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	last := peer.Unmap()
	for i := len(hops) - 1; i >= 0; i-- {
		addr, err := parseHop(hops[i])
		if err != nil {
			return last
		}
		addr = addr.Unmap().WithZone("")
		if !p.Trusted(addr) {
			return addr
		}
		last = addr
	}
	return last
}

// Key is the key of the client a request comes from (Client).
func (p Proxies) Key(r *http.Request) string {
	if k := Of(p.Client(r)); k != "" {
		return k
	}
	return r.RemoteAddr // not IP: the whole address
}

// Limits keeps a rate limiter per client key: Get finds a client's, or
// starts one with the full burst. It holds at most size clients; beyond,
// the one used least recently is forgotten (it would start afresh), so a
// flood of new clients ages out only the quietest, never every client
// at once.
type Limits struct {
	mu    sync.Mutex
	cache *lru.Cache
	every rate.Limit
	burst int
}

// NewLimits keeps up to size clients' limiters of r per second and
// bursts of burst.
func NewLimits(size int, r rate.Limit, burst int) *Limits {
	return &Limits{cache: lru.New(size), every: r, burst: burst}
}

// Get is key's limiter.
func (l *Limits) Get(key string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.cache.Get(key); ok {
		return v.(*rate.Limiter)
	}
	lim := rate.NewLimiter(l.every, l.burst)
	l.cache.Add(key, lim)
	return lim
}

// Len is the number of clients kept.
func (l *Limits) Len() int { return l.cache.Len() }

// Recent remembers the clients that did something (sent a validly
// signed notification) within a while: at most size of them, the least
// recently seen forgotten first.
type Recent struct {
	mu    sync.Mutex
	cache *lru.Cache
	ttl   time.Duration
}

// NewRecent remembers up to size clients for ttl each.
func NewRecent(size int, ttl time.Duration) *Recent {
	return &Recent{cache: lru.New(size), ttl: ttl}
}

// Saw notes key at now.
func (r *Recent) Saw(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache.Add(key, now)
}

// Seen says whether key was noted within ttl of now.
func (r *Recent) Seen(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.cache.Get(key)
	if !ok {
		return false
	}
	if now.Sub(v.(time.Time)) > r.ttl {
		r.cache.Remove(key)
		return false
	}
	return true
}

// parseHop reads one X-Forwarded-For hop: an address, or an address with
// a port (1.2.3.4:5678, [2001:db8::1]:443), which some load balancers
// write.
func parseHop(hop string) (netip.Addr, error) {
	if addr, err := netip.ParseAddr(hop); err == nil {
		return addr, nil
	}
	ap, err := netip.ParseAddrPort(hop)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr(), nil
}
