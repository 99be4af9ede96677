package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/grpcwindow"
	"github.com/fluxd/fluxd/internal/tlsfiles"
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

func dial(rawURL, token, caFile, certFile, keyFile string) (*grpc.ClientConn, error) {
	t, err := parseTarget(rawURL)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if t.tls {
		cfg, err := tlsfiles.Client(caFile, certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("setting up TLS to fluxd: %w", err)
		}
		creds = credentials.NewTLS(cfg)
	} else if caFile != "" || certFile != "" {
		return nil, fmt.Errorf("--ca-file and --cert-file are for TLS, but the fluxd address %q is plaintext: use https://%s", rawURL, t.addr)
	} else if token != "" && !loopback(t.addr) {
		fmt.Fprintf(os.Stderr, "warning: sending the API token to %s in plaintext; anyone on the network path can read it. Use https:// where fluxd serves TLS.\n", t.addr)
	}
	// Windows that hold a whole list-services answer: each command's
	// new connection would otherwise start at gRPC's 64 KiB.
	conn, err := grpc.NewClient("passthrough:///"+t.addr, append(grpcwindow.DialOptions(),
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer(token)),
		grpc.WithUserAgent("fluxctl"),
		// gRPC's default 4 MiB would refuse list-services (and
		// list-images --all) of tens of thousands of workloads; the
		// daemon's own clients take the same (daemon.MaxAnswerBytes).
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(128<<20)))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to fluxd at %s: %w", t.addr, err)
	}
	return conn, nil
}

// fluxdErrorDomain is the domain of the ErrorInfo fluxd puts on every
// error it answers (daemon.ErrorDomain; fluxctl does not import daemon).
const fluxdErrorDomain = "fluxd.io"

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
	// fluxd's humane errors carry their help text in an ErrorInfo detail;
	// one of them may be Unavailable (git cannot be read yet), which is
	// not fluxd being unreachable.
	// Any ErrorInfo of fluxd's domain means fluxd answered: the failure
	// is on its side (its own request to a registry, say), never this
	// connection's, whatever words about TLS the message holds.
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && (info.GetMetadata()["help"] != "" || info.GetDomain() == fluxdErrorDomain) {
			if help := info.GetMetadata()["help"]; help != "" {
				return st.Message() + "\n\n" + help
			}
			return st.Message()
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		detail := st.Message()
		if t, err := parseTarget(g.url); err == nil && t.tls && (strings.Contains(detail, "broken pipe") || strings.Contains(detail, "connection reset by peer")) {
			// Under TLS 1.3 a server that refuses the client's certificate
			// hangs up after the client thinks the handshake is done.
			detail = "bad certificate? the connection was closed right after the handshake: " + detail
		}
		if msg := explainTLS(detail, addr); msg != "" {
			return msg
		}
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
	return st.Message()
}

// explainTLS explains a connection that failed for TLS reasons: a
// certificate fluxctl does not trust, TLS spoken to a plaintext port, or
// plaintext spoken to a TLS port. It returns "" for other failures.
func explainTLS(detail, addr string) string {
	switch {
	case strings.Contains(detail, "certificate signed by unknown authority"), strings.Contains(detail, "certificate is not valid"), strings.Contains(detail, "x509:"):
		return fmt.Sprintf(`fluxd at %s presented a certificate fluxctl does not trust.

Likely causes:
  - fluxd's certificate is signed by a private CA (cert-manager, the cluster's own);
  - the address's host is not a name the certificate covers.
Try:
  - pass that CA with --ca-file (or FLUX_CA_FILE);
  - use the host name the certificate was issued for.
(detail: %s)`, addr, detail)
	case strings.Contains(detail, "first record does not look like a TLS handshake"):
		return fmt.Sprintf(`fluxd at %s speaks plaintext, but the address asks for TLS (https://).

Use http://%s or %s, or start fluxd with --tls-cert-file and --tls-key-file.
(detail: %s)`, addr, addr, addr, detail)
	case strings.Contains(detail, "remote error: tls:"), strings.Contains(detail, "bad certificate"), strings.Contains(detail, "certificate required"):
		// fluxd's TLS refused the handshake: after fluxctl trusted its
		// certificate, that is about the client's.
		return fmt.Sprintf(`fluxd at %s asks for a client certificate, and refused the one sent (or none was).

Pass one its --tls-client-ca-file trusts with --cert-file and --key-file (or FLUX_CERT_FILE, FLUX_KEY_FILE).
(detail: %s)`, addr, detail)
	case strings.Contains(detail, "connection closed before server preface received"), strings.Contains(detail, "error reading server preface"):
		return fmt.Sprintf(`fluxd at %s closed the connection before answering: it may serve TLS, and the address asks for plaintext.

Try https://%s (with --ca-file if its certificate is signed by a private CA).
(detail: %s)`, addr, addr, detail)
	}
	return ""
}

// loopback reports whether addr's host is this machine.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
