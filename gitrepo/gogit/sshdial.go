package gogit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// go-git's SSH transport (v5.19) bounds only the TCP dial, with
// ssh.ClientConfig.Timeout: the SSH handshake and the session after it run
// with no deadline and no context, so a remote that accepts the connection
// and never answers holds the operation, and the clone's lock, forever.
// The one hook go-git offers on the SSH connection is its proxy option,
// which it resolves through x/net/proxy's registry of schemes. fluxd
// registers a scheme of its own there, so that each SSH operation dials
// through boundDialer: the connection carries the operation's deadline and
// is closed when the operation's context ends, which ends the handshake
// or the session blocked on it with an error.
const connScheme = "fluxd-bounded"

// boundOps maps an operation's id (the proxy URL's host) to its context.
var (
	boundOps   sync.Map // string -> context.Context
	boundOpSeq atomic.Uint64
)

func init() {
	proxy.RegisterDialerType(connScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		return boundDialer{id: u.Host}, nil
	})
}

// boundConnection makes the SSH connections of the operation running
// under ctx end with it: the proxy option to pass to go-git, and a
// function to call when the operation is over.
func boundConnection(ctx context.Context) (transport.ProxyOptions, func()) {
	id := "op" + strconv.FormatUint(boundOpSeq.Add(1), 10)
	boundOps.Store(id, ctx)
	return transport.ProxyOptions{URL: connScheme + "://" + id}, func() { boundOps.Delete(id) }
}

// boundDialer dials directly, binding the connection to its operation.
type boundDialer struct{ id string }

func (d boundDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d boundDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	v, ok := boundOps.Load(d.id)
	if !ok {
		return nil, errors.New("the git operation this connection was for has ended")
	}
	op := v.(context.Context)
	if err := op.Err(); err != nil {
		return nil, err
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := op.Deadline(); ok {
		if err := c.SetDeadline(deadline); err != nil {
			c.Close()
			return nil, fmt.Errorf("setting the connection's deadline: %w", err)
		}
	}
	stop := context.AfterFunc(op, func() { _ = c.Close() })
	return &boundConn{Conn: c, stop: stop}, nil
}

// boundConn is a connection closed when its operation's context ends.
type boundConn struct {
	net.Conn
	stop func() bool
}

func (c *boundConn) Close() error {
	c.stop()
	return c.Conn.Close()
}
