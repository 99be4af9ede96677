package localstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Every secret the stack or a test hands to fluxd (API tokens, webhook
// secrets, registry passwords) is noted, and at the end of a test binary
// every log of the stack is searched for them: a secret found in a log is
// a leak, and fails the run (RunTests).

var secrets struct {
	mu   sync.Mutex
	vals map[string]string // secret → what it is
}

// NoteSecret records a secret that must never appear in a log.
func NoteSecret(what, v string) {
	if len(v) < 8 { // too short to search for without false hits
		return
	}
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	if secrets.vals == nil {
		secrets.vals = map[string]string{}
	}
	secrets.vals[v] = what
}

// LeakedSecrets searches every file under dir/logs for the noted secrets
// and returns one line per secret found: the file and what the secret is
// (never the secret itself).
func LeakedSecrets(dir string) ([]string, error) {
	secrets.mu.Lock()
	vals := make(map[string]string, len(secrets.vals))
	for k, v := range secrets.vals {
		vals[k] = v
	}
	secrets.mu.Unlock()
	files, err := filepath.Glob(filepath.Join(dir, "logs", "*"))
	if err != nil {
		return nil, err
	}
	var leaks []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for v, what := range vals {
			if n := strings.Count(string(b), v); n > 0 {
				leaks = append(leaks, fmt.Sprintf("%s holds %s (%d times)", f, what, n))
			}
		}
	}
	return leaks, nil
}

// SecretsNoted says how many secrets the scan looks for.
func SecretsNoted() int {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	return len(secrets.vals)
}
