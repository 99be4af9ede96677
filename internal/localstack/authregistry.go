package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DistributionOptions configure a CNCF distribution registry the stack
// starts on demand (StartDistributionRegistry).
type DistributionOptions struct {
	// User and Password, when User is set, make the registry require
	// basic authentication as User:Password (an htpasswd file made with
	// Debian's htpasswd). Otherwise it serves anyone.
	User, Password string
	// Notify, when set, is an endpoint the registry posts its
	// notifications to.
	Notify *NotifyEndpoint
}

// NotifyEndpoint is one entry of the registry's notifications.endpoints.
// The registry keeps one queue per endpoint and sends each event again
// until the endpoint answers 2xx within Timeout; after Threshold failures
// in a row it waits Backoff between attempts.
type NotifyEndpoint struct {
	// Name names the endpoint in the registry's config and logs.
	Name string
	// URL receives the POSTs, e.g. http://HOST:PORT/v1/notify.
	URL string
	// BearerToken, if set, is sent as "Authorization: Bearer TOKEN".
	BearerToken string
	// Timeout, Threshold and Backoff: defaults 2s, 5 and 1s.
	Timeout   time.Duration
	Threshold int
	Backoff   time.Duration
}

// DistributionRegistry is a distribution registry the stack started.
type DistributionRegistry struct {
	// Addr is its host:port on loopback, the address pushers use (and so
	// the request.host of its notifications).
	Addr string
	// Log is the path of its log file.
	Log string
	// DebugAddr is its debug listener's host:port: /debug/vars (expvar)
	// holds "registry"."notifications", each endpoint's counts of
	// events, successes, failures, errors, pending events and response
	// statuses.
	DebugAddr string
}

// StartAuthRegistry starts a distribution registry that requires basic
// authentication as user:password, and returns its host:port (see
// StartDistributionRegistry).
func (s *Stack) StartAuthRegistry(ctx context.Context, user, password string) (string, error) {
	r, err := s.StartDistributionRegistry(ctx, DistributionOptions{User: user, Password: password})
	if err != nil {
		return "", err
	}
	return r.Addr, nil
}

// StartDistributionRegistry starts, on demand, a CNCF distribution
// registry (Debian's docker-registry, see hack/deps.sh) on a loopback
// port, with authentication and notifications as opts say. Its config,
// file storage and htpasswd file are under the stack's directory; it
// stops with the stack. Push to it one image at a time: parallel pushes
// of images that share a blob fail now and then.
func (s *Stack) StartDistributionRegistry(ctx context.Context, opts DistributionOptions) (*DistributionRegistry, error) {
	bins := []string{"docker-registry"}
	if opts.User != "" {
		bins = append(bins, "htpasswd")
	}
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (run hack/deps.sh): %w", bin, err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	kind := "registry"
	if opts.User != "" {
		kind = "auth-registry"
	} else if opts.Notify != nil {
		kind = "notify-registry"
	}
	name := kind + "-" + strconv.Itoa(port)
	dir := filepath.Join(s.Dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	var secret [16]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	debugAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	var config strings.Builder
	fmt.Fprintf(&config, `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
  debug:
    addr: %s
`, filepath.Join(dir, "data"), addr, hex.EncodeToString(secret[:]), debugAddr)
	if opts.User != "" {
		NoteSecret("the password of an authenticating registry", opts.Password)
		htpasswd := filepath.Join(dir, "htpasswd")
		// The registry reads only bcrypt entries (-B).
		if out, err := exec.CommandContext(ctx, "htpasswd", "-Bbc", htpasswd, opts.User, opts.Password).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("htpasswd: %w: %s", err, out)
		}
		fmt.Fprintf(&config, `auth:
  htpasswd:
    realm: fluxd-stack
    path: %s
`, htpasswd)
	}
	if n := opts.Notify; n != nil {
		ep := *n
		if ep.Name == "" {
			ep.Name = "endpoint"
		}
		if ep.Timeout == 0 {
			ep.Timeout = 2 * time.Second
		}
		if ep.Threshold == 0 {
			ep.Threshold = 5
		}
		if ep.Backoff == 0 {
			ep.Backoff = time.Second
		}
		fmt.Fprintf(&config, `notifications:
  endpoints:
    - name: %q
      url: %q
      timeout: %s
      threshold: %d
      backoff: %s
`, ep.Name, ep.URL, ep.Timeout, ep.Threshold, ep.Backoff)
		if ep.BearerToken != "" {
			NoteSecret("the notifications bearer token of "+name, ep.BearerToken)
			fmt.Fprintf(&config, "      headers:\n        Authorization: [%q]\n", "Bearer "+ep.BearerToken)
		}
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config.String()), 0o600); err != nil {
		return nil, err
	}
	p, err := s.spawn(name, "docker-registry", "serve", cfgPath)
	if err != nil {
		return nil, err
	}
	// Up when /v2/ answers: 401 (asking for credentials) with
	// authentication, 200 without.
	want := http.StatusOK
	if opts.User != "" {
		want = http.StatusUnauthorized
	}
	err = waitFor(ctx, p, 30*time.Second, name+" /v2/", func() error {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("/v2/ without credentials: %s, want %d", resp.Status, want)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.logf("%-34s ready on %s", strings.ReplaceAll(kind, "-", " "), addr)
	return &DistributionRegistry{Addr: addr, Log: p.logPath, DebugAddr: debugAddr}, nil
}
