package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// parseFlags parses args as fluxd's command line does, with every
// default, after setting POD_NAMESPACE to "" (the defaults that follow
// the pod's namespace read it when the flags are defined).
func parseFlags(t *testing.T, args ...string) flags {
	t.Helper()
	t.Setenv("POD_NAMESPACE", "")
	var f flags
	fs := pflag.NewFlagSet("fluxd", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return f
}

// validArgs are the fewest flags fluxd starts with: a tokens file that
// exists, a git remote and a state directory.
func validArgs(t *testing.T) (state string, args []string) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if _, err := auth.Create(tokens, auth.Identity{Instance: "team", Role: auth.Admin}); err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(dir, "state")
	return state, []string{"--tokens-file=" + tokens, "--git-url=file:///srv/git/manifests.git", "--state-dir=" + state}
}

// The defaults that follow from other flags: the history database and
// the clone under --state-dir, a deploy key fluxd generates unless one is
// given (a file or a Secret), no leader election unless asked for.
func TestConfigureDefaults(t *testing.T) {
	state, args := validArgs(t)
	c, err := parseFlags(t, args...).configure()
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Listen, StoreURL, CloneDir, Branch, KeyFile, KeySource string
		GenerateKey, Election                                  bool
		MaxConns                                               int
		StatementTimeout, GitTimeout, ShutdownGrace            time.Duration
		QPS                                                    float32
	}
	sum := func(c configs) summary {
		return summary{Listen: c.daemon.Listen, StoreURL: c.store.URL, CloneDir: c.git.Dir, Branch: c.git.Branch, KeyFile: c.git.SSHKeyFile, KeySource: c.git.SSHKeySource,
			GenerateKey: c.git.GenerateSSHKey, Election: c.election != nil, MaxConns: c.store.MaxConns, StatementTimeout: c.store.StatementTimeout,
			GitTimeout: c.git.Timeout, ShutdownGrace: c.daemon.ShutdownGrace, QPS: c.kube.QPS}
	}
	want := summary{Listen: "127.0.0.1:3030", StoreURL: filepath.Join(state, "history.db"), CloneDir: filepath.Join(state, "repo"), Branch: "main",
		KeyFile: filepath.Join(state, "ssh", "identity"), GenerateKey: true, MaxConns: 10, StatementTimeout: 30 * time.Second,
		GitTimeout: gogit.DefaultTimeout, ShutdownGrace: 10 * time.Second, QPS: 50}
	if diff := cmp.Diff(want, sum(c)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	c, err = parseFlags(t, append(args, "--history-db=postgres://fluxd@db:5432/fluxd", "--git-ssh-key-secret=ops/fluxd-key", "--leader-elect")...).configure()
	if err != nil {
		t.Fatal(err)
	}
	want.StoreURL, want.KeyFile, want.KeySource, want.GenerateKey, want.Election = "postgres://fluxd@db:5432/fluxd", "", "the Secret ops/fluxd-key", false, true
	if diff := cmp.Diff(want, sum(c)); diff != "" {
		t.Errorf("with --history-db, --git-ssh-key-secret and --leader-elect (-want +got):\n%s", diff)
	}
	if e := c.election; e.Namespace != "default" || e.Name != "fluxd" || e.LeaseDuration != 15*time.Second || e.RenewDeadline != 10*time.Second || e.RetryPeriod != 2*time.Second || e.Address != "" {
		t.Errorf("election = %+v; want the default Lease default/fluxd, 15s/10s/2s, the address left for advertise", *e)
	}
}

// Each invalid flag, or combination, is refused before anything starts,
// with a message naming the flag, what is wrong and what to do; several
// problems are reported at once.
func TestConfigureRefusesBadFlags(t *testing.T) {
	_, valid := validArgs(t)
	cases := []struct {
		name string
		args []string // added to valid's
		bare bool     // args alone, without valid's
		want []string
	}{
		{"nothing given", nil, true, []string{"--tokens-file is empty", "fluxd token create", "--git-url is empty"}},
		{"a tokens file that does not exist", []string{"--tokens-file=/nonexistent/tokens"}, false, []string{"--tokens-file /nonexistent/tokens cannot be read"}},
		{"two SSH keys", []string{"--git-ssh-key-file=/k", "--git-ssh-key-secret=k"}, false, []string{"--git-ssh-key-secret and --git-ssh-key-file both name the SSH key; give one"}},
		{"clone retries under a second", []string{"--git-clone-retry-max=500ms"}, false, []string{"--git-clone-retry-max 500ms is under the first wait of 1s"}},
		{"webhooks without a secret", []string{"--webhook-listen=127.0.0.1:0"}, false, []string{"--webhook-listen needs --webhook-secret-file"}},
		{"lease timings out of order", []string{"--leader-elect", "--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=3s"}, false, []string{"lease duration (2s) > renew deadline (3s) > retry period (2s) > 0"}},
		{"no lease name", []string{"--leader-elect", "--leader-elect-lease-name="}, false, []string{"leader election needs a namespace and a lease name"}},
		{"lease flags without --leader-elect are not checked", []string{"--leader-elect-lease-duration=1s"}, false, nil},
		{"a web URL that is not one", []string{"--web-url=fluxd.example.com"}, false, []string{`--web-url "fluxd.example.com" is not an http:// or https:// URL`}},
		{"pruning without syncing", []string{"--sync-prune"}, false, []string{"--sync-prune needs --sync-interval"}},
		{"a sync inventory that is not NAMESPACE/NAME", []string{"--sync-interval=5m", "--sync-inventory=fluxd-sync"}, false, []string{`--sync-inventory "fluxd-sync" is not NAMESPACE/NAME`}},
		{"a delegation kind that is not one", []string{"--sync-allow-delegation=Kustomization,GitRepository"}, false, []string{"--sync-allow-delegation names GitRepository: it takes Kustomization,HelmRelease,Application,ApplicationSet,AppProject"}},
		{"a negative sync interval", []string{"--sync-interval=-1m"}, false, []string{"--sync-interval must be positive"}},
		{"a notification age of zero", []string{"--notify-max-age=0s"}, false, []string{"--notify-max-age 0s must be positive"}},
		{"a cluster name with a dot", []string{"--cluster-name=eu.west"}, false, []string{`--cluster-name "eu.west" is not a cluster name`}},
		{"a cluster name", []string{"--cluster-name=eu-west-1"}, false, nil},
		{"a GC target out of range", []string{"--gc-percent=5"}, false, []string{"--gc-percent=5: the garbage collector's target is between 10 and 1000"}},
		{"every problem at once", []string{"--git-clone-retry-max=1ms", "--notify-max-age=0s", "--webhook-listen=:0"}, false,
			[]string{"--git-clone-retry-max 1ms", "--notify-max-age 0s", "--webhook-listen needs --webhook-secret-file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !tc.bare {
				args = append(append([]string(nil), valid...), tc.args...)
			}
			_, err := parseFlags(t, args...).configure()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%q accepted; want an error saying %q", tc.args, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "invalid configuration:") {
				t.Errorf("error %q does not start with \"invalid configuration:\"", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to say %q", err, w)
				}
			}
		})
	}
}

// fluxd with bad flags stops before it makes anything: no state
// directory, no database file; a bad log flag is named.
func TestRunWithBadFlagsMakesNothing(t *testing.T) {
	state, args := validArgs(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format=xml"}, `--log-format "xml": use text or json`},
		{[]string{"--log-level=loud"}, `--log-level "loud": use debug, info, warn or error`},
		{[]string{"--git-clone-retry-max=0s"}, "--git-clone-retry-max 0s"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), parseFlags(t, append(append([]string(nil), args...), tc.args...)...), &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q: %v; want an error saying %q", tc.args, err, tc.want)
		}
		if _, serr := os.Stat(state); !os.IsNotExist(serr) {
			t.Errorf("run %q made --state-dir (%v); want nothing made", tc.args, serr)
		}
	}
}

// The clone's retry cap is at least its first wait.
func TestValidateRetryMax(t *testing.T) {
	t.Parallel()
	if err := validateRetryMax(time.Minute); err != nil {
		t.Errorf("1m: %v", err)
	}
	if err := validateRetryMax(100 * time.Millisecond); err == nil {
		t.Error("100ms is accepted; want it refused as under the first wait of 1s")
	}
}
