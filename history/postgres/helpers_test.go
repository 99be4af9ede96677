package postgres

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
)

// proxy is a TCP proxy to a PostgreSQL server whose client-to-server
// stream a test can sabotage: cut decides, for each chunk the client sends,
// whether to forward it and then drop the connection without an answer.
type proxy struct {
	l net.Listener

	mu  sync.Mutex
	cut func(chunk []byte) bool
	// hold, while true, forwards nothing either way (a server that went
	// silent: no RST, no FIN).
	hold bool
}

// newProxy starts a proxy to the server on port; it stops with the test.
func newProxy(t *testing.T, port int) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	t.Cleanup(func() { l.Close() })
	go p.serve(port)
	return p
}

// url returns u with its host replaced by the proxy's.
func (p *proxy) url(t *testing.T, u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.l.Addr().String()
	return pu.String()
}

func (p *proxy) set(cut func([]byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
}

func (p *proxy) setHold(h bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = h
}

func (p *proxy) state() (func([]byte) bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.hold
}

func (p *proxy) serve(port int) {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			c.Close()
			continue
		}
		go p.pipe(b, c, false)
		go p.pipe(c, b, true)
	}
}

// pipe copies from src to dst; fromClient says src is the client.
func (p *proxy) pipe(src, dst net.Conn, fromClient bool) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			cut, hold := p.state()
			if hold {
				// Swallow: the other side hears nothing, and the
				// connection stays open.
				continue
			}
			if fromClient && cut != nil && cut(buf[:n]) {
				p.set(nil)
				_, _ = dst.Write(buf[:n])
				// The client never hears back; the server still runs
				// what it was sent.
				src.Close()
				_, _ = io.Copy(io.Discard, dst)
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// isCommit says a chunk carries a COMMIT statement.
func isCommit(chunk []byte) bool {
	return bytes.Contains(bytes.ToLower(chunk), []byte("commit\x00"))
}
