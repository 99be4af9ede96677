package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const defaultPort = "3030"

// target is a parsed fluxd address.
type target struct {
	addr string // host:port
	tls  bool
}

// errNoURL is returned when neither --url nor FLUX_URL is set.
var errNoURL = errors.New(`no fluxd address is set.

Set FLUX_URL, or pass --url, to where fluxd listens, for example:
  export FLUX_URL=localhost:3030
With the local stack, 'source .stack/env' sets FLUX_URL and FLUX_TOKEN.`)

// parseTarget accepts "host:port", "host", "http://host:port",
// "grpc://host:port", and "https://" or "grpcs://" for TLS.
func parseTarget(raw string) (target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return target{}, errNoURL
	}
	t := target{}
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return target{}, fmt.Errorf("fluxd address %q is not a URL: %w", raw, err)
		}
		switch u.Scheme {
		case "http", "grpc":
		case "https", "grpcs":
			t.tls = true
		default:
			return target{}, fmt.Errorf("fluxd address %q has scheme %q; use host:port, grpc://, http://, or https:// for TLS", raw, u.Scheme)
		}
		if u.Path != "" && u.Path != "/" {
			return target{}, fmt.Errorf("fluxd address %q has a path %q; fluxd's API has none: use %s://%s", raw, u.Path, u.Scheme, u.Host)
		}
		raw = u.Host
	}
	raw = strings.TrimSuffix(raw, "/")
	host, port, err := net.SplitHostPort(raw)
	if err != nil {
		host, port = raw, defaultPort
		if t.tls {
			port = "443"
		}
	}
	if host == "" {
		return target{}, fmt.Errorf("fluxd address %q has no host", raw)
	}
	t.addr = net.JoinHostPort(host, port)
	return t, nil
}

// bearer sends the API token with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that a loopback fluxd without TLS
// works; use an https:// address wherever the network is not trusted.
func (bearer) RequireTransportSecurity() bool { return false }

func dial(rawURL, token string) (*grpc.ClientConn, error) {
	t, err := parseTarget(rawURL)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if t.tls {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient("passthrough:///"+t.addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer(token)),
		grpc.WithUserAgent("fluxctl"))
	if err != nil {
		return nil, fmt.Errorf("connecting to fluxd at %s: %w", t.addr, err)
	}
	return conn, nil
}

// explain turns an error into what a person should read.
func explain(err error, g *globals) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	addr := g.url
	if t, err := parseTarget(g.url); err == nil {
		addr = t.addr
	}
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Sprintf(`cannot reach fluxd at %s.

Likely causes:
  - fluxd is not running, or listens on another address (see its --listen flag);
  - FLUX_URL or --url points at the wrong host or port;
  - a firewall or port-forward is in the way.
Try:
  - check that fluxd runs and which address it logged at start ("fluxd started");
  - with the local stack: 'make up', then 'source .stack/env'.
(detail: %s)`, addr, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Sprintf("fluxd at %s did not answer within --timeout %v.\n\nTry a longer --timeout, or look at the daemon's log for what it is waiting on.", addr, g.timeout)
	}
	// fluxd's humane errors carry their help text in an ErrorInfo detail.
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetMetadata()["help"] != "" {
			return st.Message() + "\n\n" + info.GetMetadata()["help"]
		}
	}
	return st.Message()
}
