package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want target
		err  string
	}{
		{in: "localhost:3030", want: target{addr: "localhost:3030"}},
		{in: "localhost", want: target{addr: "localhost:3030"}},
		{in: "http://host:3030", want: target{addr: "host:3030"}},
		{in: "http://host:3030/", want: target{addr: "host:3030"}},
		{in: "grpc://10.1.2.3:4040", want: target{addr: "10.1.2.3:4040"}},
		{in: "https://flux.example.com", want: target{addr: "flux.example.com:443", tls: true}},
		{in: "grpcs://flux.example.com:8443", want: target{addr: "flux.example.com:8443", tls: true}},
		{in: "[::1]:3030", want: target{addr: "[::1]:3030"}},
		{in: "  localhost:3030 ", want: target{addr: "localhost:3030"}},
		{in: "", err: "no fluxd address is set"},
		{in: "ftp://host", err: `scheme "ftp"`},
		{in: "http://host:3030/api/flux", err: "has a path"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseTarget(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseTarget(%q) error = %v, want %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestExplainUnavailableIsHumane(t *testing.T) {
	t.Parallel()
	g := &globals{url: "grpc://localhost:1", timeout: time.Second}
	msg := explain(status.Error(codes.Unavailable, "connection refused"), g)
	for _, want := range []string{"cannot reach fluxd at localhost:1", "Likely causes", "Try:", "make up", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if got := explain(errors.New("plain"), g); got != "plain" {
		t.Errorf("explain(plain) = %q", got)
	}
}

// A failure of fluxd's own request (to a registry, say) is fluxd's
// answer: fluxctl must not blame its own connection for it, whatever the
// message says about TLS.
func TestExplainDoesNotBlameTheConnectionForFluxdsOwnFailure(t *testing.T) {
	t.Parallel()
	g := &globals{url: "https://fluxd.example:3030", timeout: time.Second}
	msg := `fluxd's request to registry 10.0.0.1:5000 for 10.0.0.1:5000/x failed: registry 10.0.0.1:5000: tls: first record does not look like a TLS handshake`
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.ErrorInfo{Reason: "UNAVAILABLE", Domain: "fluxd.io"})
	if err != nil {
		t.Fatal(err)
	}
	got := explain(st.Err(), g)
	if strings.Contains(got, "speaks plaintext") || strings.Contains(got, "cannot reach fluxd") {
		t.Fatalf("fluxctl blamed its connection to fluxd for fluxd's registry request:\n%s", got)
	}
	if !strings.Contains(got, "registry 10.0.0.1:5000") {
		t.Fatalf("the message lost what failed:\n%s", got)
	}
	// Without fluxd's ErrorInfo, the same words are about this connection.
	if got := explain(status.Error(codes.Unavailable, "tls: first record does not look like a TLS handshake"), g); !strings.Contains(got, "speaks plaintext") {
		t.Fatalf("a TLS mismatch of fluxctl's own connection is no longer explained:\n%s", got)
	}
}
