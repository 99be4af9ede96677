package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"

	"google.golang.org/grpc/credentials"
)

// limitListener accepts at most n connections at once: Accept waits
// while n are open. Of those, one client address (an IPv4 address, an
// IPv6 /64) may hold at most perAddr: a connection beyond that is closed
// as soon as it is accepted, so that no one client (the health service
// needs no token) can fill the n and keep everyone else waiting. (x/net/
// netutil's limit does neither, and hides the connection it wraps, which
// tlsInfo must reach.)
type limitListener struct {
	net.Listener
	sem     chan struct{}
	perAddr int
	mu      sync.Mutex
	byAddr  map[string]int
	// closed ends an Accept waiting for a free connection: gRPC's Stop
	// closes the listener, then waits for Serve's Accept to return before
	// it closes any connection.
	closed    chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n, perAddr int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), perAddr: perAddr, byAddr: map[string]int{}, closed: make(chan struct{})}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.sem <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		key := addrKey(c.RemoteAddr())
		l.mu.Lock()
		over := key != "" && l.byAddr[key] >= l.perAddr
		if !over && key != "" {
			l.byAddr[key]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			<-l.sem
			continue
		}
		return &limitedConn{Conn: c, release: func() {
			if key != "" {
				l.mu.Lock()
				if l.byAddr[key]--; l.byAddr[key] <= 0 {
					delete(l.byAddr, key)
				}
				l.mu.Unlock()
			}
			<-l.sem
		}}, nil
	}
}

// addrKey is the client a connection counts against: its IPv4 address,
// or its IPv6 address's /64 (one host commonly holds a whole /64), or ""
// (not counted) for an address that is not IP.
func addrKey(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return ""
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
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
