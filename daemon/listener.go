package daemon

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/fluxd/fluxd/internal/clientkey"
)

// limitListener bounds the connections a server holds: at most n at
// once, of which at most n-kept unauthenticated.
//
// A connection is unauthenticated until a call on it shows a valid token
// (promote): a client's first call, at once for fluxctl, the page's
// in-process calls aside, and a follower's forwarded calls, which carry
// their caller's token. When the unauthenticated connections fill their
// share, or all n are open, a new connection is still accepted and an
// unauthenticated one is closed for it: the oldest of the client holding
// the most unauthenticated connections. So a flood of connections that
// never authenticate churns through its share, and a client that opens
// one connection and shows its token at once is not closed while any
// flooding address holds two. Only when all n connections are
// authenticated does Accept wait for one to close.
//
// One client (clientkey: an IPv4 address, an IPv6 /64) may hold at most
// perAddr connections: one beyond is closed as soon as it is accepted.
// A trusted proxy's connections count against n only, since it carries
// many clients. (x/net/netutil's limit does none of this, and hides the
// connection it wraps, which tlsInfo must reach.)
type limitListener struct {
	net.Listener
	n, kept, perAddr int
	proxies          clientkey.Proxies

	mu   sync.Mutex
	open int
	// unproven counts the unauthenticated connections; groups holds
	// them by client (a trusted proxy's each on its own), oldest first.
	unproven int
	groups   map[string]*list.List
	seq      uint64 // of the last connection accepted
	byAddr   map[string]int
	byRemote map[string]*limitedConn // by RemoteAddr, for promote
	// room is poked when a connection closes.
	room chan struct{}
	// closed ends an Accept waiting for a free connection: gRPC's Stop
	// closes the listener, then waits for Serve's Accept to return before
	// it closes any connection.
	closed    chan struct{}
	closeOnce sync.Once
}

// newLimitListener limits l to n connections, kept of them for
// authenticated ones, perAddr per client; proxies' connections are not
// counted per client.
func newLimitListener(l net.Listener, n, kept, perAddr int, proxies clientkey.Proxies) *limitListener {
	return &limitListener{Listener: l, n: n, kept: min(max(kept, 0), n-1), perAddr: perAddr, proxies: proxies,
		groups: map[string]*list.List{}, byAddr: map[string]int{}, byRemote: map[string]*limitedConn{},
		room: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		// Wait while every connection is open and authenticated.
		l.mu.Lock()
		full := l.open >= l.n && l.unproven == 0
		l.mu.Unlock()
		if full {
			select {
			case <-l.room:
				continue
			case <-l.closed:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, remote: c.RemoteAddr().String()}
		if !l.proxies.TrustedAddr(c.RemoteAddr()) {
			lc.key = clientkey.OfAddr(c.RemoteAddr())
		}
		l.mu.Lock()
		if lc.key != "" && l.byAddr[lc.key] >= l.perAddr {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		var evicted *limitedConn
		if l.unproven >= l.n-l.kept || l.open >= l.n {
			if evicted = l.victim(); evicted != nil {
				l.drop(evicted)
			} else { // all became authenticated meanwhile
				l.mu.Unlock()
				_ = c.Close()
				continue
			}
		}
		l.open++
		if lc.key != "" {
			l.byAddr[lc.key]++
		}
		l.seq++
		lc.seq, lc.group = l.seq, lc.key
		if lc.group == "" {
			lc.group = lc.remote
		}
		g := l.groups[lc.group]
		if g == nil {
			g = list.New()
			l.groups[lc.group] = g
		}
		lc.elem = g.PushBack(lc)
		l.unproven++
		l.byRemote[lc.remote] = lc
		l.mu.Unlock()
		if evicted != nil {
			_ = evicted.Conn.Close()
		}
		return lc, nil
	}
}

// promote marks the connection whose peer is addr as authenticated: it
// is no longer closed for newcomers.
func (l *limitListener) promote(addr net.Addr) {
	if addr == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.byRemote[addr.String()]; c != nil && c.elem != nil {
		l.unprove(c)
	}
}

// unprove takes c from the unauthenticated; l.mu is held.
func (l *limitListener) unprove(c *limitedConn) {
	g := l.groups[c.group]
	g.Remove(c.elem)
	if g.Len() == 0 {
		delete(l.groups, c.group)
	}
	c.elem = nil
	l.unproven--
}

// victim is the unauthenticated connection to close for a new one: the
// oldest of the client holding the most, or nil for none; l.mu is held.
func (l *limitListener) victim() *limitedConn {
	var v *limitedConn
	most := 0
	for _, g := range l.groups {
		c := g.Front().Value.(*limitedConn)
		if g.Len() > most || g.Len() == most && c.seq < v.seq {
			v, most = c, g.Len()
		}
	}
	return v
}

// drop takes c out of the counts, once; l.mu is held.
func (l *limitListener) drop(c *limitedConn) {
	if c.gone {
		return
	}
	c.gone = true
	l.open--
	if c.elem != nil {
		l.unprove(c)
	}
	if c.key != "" {
		if l.byAddr[c.key]--; l.byAddr[c.key] <= 0 {
			delete(l.byAddr, c.key)
		}
	}
	if l.byRemote[c.remote] == c {
		delete(l.byRemote, c.remote)
	}
	select {
	case l.room <- struct{}{}:
	default:
	}
}

type limitedConn struct {
	net.Conn
	l      *limitListener
	remote string
	// key is the client it counts against, "" for none; group is the
	// client it is closed as (its key, else its own address).
	key, group string
	seq        uint64
	// Under l.mu: elem is its place among the unauthenticated; gone says
	// it was dropped from the counts.
	elem *list.Element
	gone bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return err
}

// NetConn is the connection below, as tls.Conn names it.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// tlsInfo is the gRPC server's transport credentials over listeners that
// fluxd wraps in TLS itself (certificates re-read on change): it
// finishes the handshake and hands gRPC the connection's TLS state, so
// that a call can tell which client certificate its connection
// presented (checkForwarded). Other connections pass as they are.
type tlsInfo struct{}

func (tlsInfo) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var tc *tls.Conn
	for inner := c; inner != nil; {
		if t, ok := inner.(*tls.Conn); ok {
			tc = t
			break
		}
		u, ok := inner.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		inner = u.NetConn()
	}
	if tc == nil {
		return c, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, nil, err
	}
	return c, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (tlsInfo) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsInfo is a server's credentials")
}

func (tlsInfo) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (t tlsInfo) Clone() credentials.TransportCredentials { return t }

func (tlsInfo) OverrideServerName(string) error { return nil }
