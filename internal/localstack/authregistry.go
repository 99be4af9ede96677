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
	"time"
)

// StartAuthRegistry starts, on demand, a CNCF distribution registry
// (Debian's docker-registry, see hack/deps.sh) on a loopback port that
// requires basic authentication as user:password (an htpasswd file made
// with Debian's htpasswd), and returns its host:port. Its config, file
// storage and htpasswd file are under the stack's directory; it stops
// with the stack. Push to it one image at a time: parallel pushes of
// images that share a blob fail now and then.
func (s *Stack) StartAuthRegistry(ctx context.Context, user, password string) (string, error) {
	NoteSecret("the password of an authenticating registry", password)
	for _, bin := range []string{"docker-registry", "htpasswd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%s is not installed (run hack/deps.sh): %w", bin, err)
		}
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	name := "auth-registry-" + strconv.Itoa(port)
	dir := filepath.Join(s.Dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return "", err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	// The registry reads only bcrypt entries (-B).
	if out, err := exec.CommandContext(ctx, "htpasswd", "-Bbc", htpasswd, user, password).CombinedOutput(); err != nil {
		return "", fmt.Errorf("htpasswd: %w: %s", err, out)
	}
	var secret [16]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	config := fmt.Sprintf(`version: 0.1
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
auth:
  htpasswd:
    realm: fluxd-stack
    path: %s
`, filepath.Join(dir, "data"), addr, hex.EncodeToString(secret[:]), htpasswd)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return "", err
	}
	p, err := s.spawn(name, "docker-registry", "serve", cfgPath)
	if err != nil {
		return "", err
	}
	// Up when /v2/ asks for credentials.
	err = waitFor(ctx, p, 30*time.Second, name+" /v2/", func() error {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("/v2/ without credentials: %s, want 401", resp.Status)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	s.logf("%-34s ready on %s", "authenticating registry", addr)
	return addr, nil
}
