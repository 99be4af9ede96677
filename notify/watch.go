package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Watcher keeps the config file's newest good version. It reads the file
// (and the secret files it names) again every Interval and takes a
// changed one only when it is good: a bad edit is logged and counted,
// and the previous config stays. It polls rather than watching with
// inotify, because a mounted ConfigMap or Secret changes by swapping a
// symlink (which a watch on the file misses), and a read of a small file
// every few seconds costs nothing.
type Watcher struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	metrics  *Metrics

	mu      sync.Mutex
	cfg     *Config
	sum     [sha256.Size]byte
	changed chan struct{}
}

// NewWatcher loads the config at path: an error (naming the line) when
// it is bad, which fluxd reports at start.
func NewWatcher(path string, interval time.Duration, metrics *Metrics, log *slog.Logger) (*Watcher, error) {
	cfg, sum, err := load(path)
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = 5 * time.Second
	}
	return &Watcher{path: path, interval: interval, log: log, metrics: metrics, cfg: cfg, sum: sum, changed: make(chan struct{})}, nil
}

// load reads the config and fingerprints it with its secrets, so that a
// rotated secret is a change too.
func load(path string) (*Config, [sha256.Size]byte, error) {
	cfg, err := Load(path)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	var b bytes.Buffer
	raw, _ := os.ReadFile(path)
	b.Write(raw)
	for _, r := range cfg.Receivers {
		b.WriteString("\x00" + r.URL + "\x00" + r.Secret)
	}
	return cfg, sha256.Sum256(b.Bytes()), nil
}

// Config is the current config, and a channel closed when it changes.
func (w *Watcher) Config() (*Config, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg, w.changed
}

// Run re-reads the file until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cfg, sum, err := load(w.path)
		if err != nil {
			if err.Error() != lastErr {
				w.log.Error("the notification config changed and is not valid; the previous one stays in use", "component", "notify", "error", err)
				w.metrics.reload(false)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		w.mu.Lock()
		if sum == w.sum {
			w.mu.Unlock()
			continue
		}
		w.cfg, w.sum = cfg, sum
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		w.metrics.reload(true)
		w.log.Info("notification config reloaded", "component", "notify", "receivers", len(cfg.Receivers))
	}
}

// Static is a config that never changes.
func Static(cfg *Config) Receivers { return static{cfg} }

type static struct{ cfg *Config }

func (s static) Config() (*Config, <-chan struct{}) { return s.cfg, nil }
