package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// limitListener accepts at most n connections at once: Accept waits
// while n are open. (x/net/netutil's does the same, but hides the
// connection it wraps, which tlsInfo must reach.)
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
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
