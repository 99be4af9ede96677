// Command stack brings the local stack up for a person ('make up') and
// down again ('make down'). It keeps everything under .stack/ in the
// module root: state, logs, PID files and the env file to source.
//
//	go run ./hack/stack up   BIN_DIR FLUXD_BINARY   (DB=postgres: fluxd on a PostgreSQL server the stack starts)
//	go run ./hack/stack restart-fluxd [--flag=value ...]   (flags added to fluxd's, and kept)
//	go run ./hack/stack down
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

const instance = "demo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "up":
		err = up(ctx, os.Args[2], os.Args[3])
	case len(os.Args) == 2 && os.Args[1] == "down":
		err = down()
	case len(os.Args) >= 2 && os.Args[1] == "restart-fluxd":
		err = restartFluxd(ctx, os.Args[2:]...)
	default:
		err = fmt.Errorf("usage: stack up BIN_DIR FLUXD_BINARY | stack restart-fluxd [--flag=value ...] | stack down")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func stateDir() (string, error) {
	root, err := localstack.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".stack"), nil
}

func up(ctx context.Context, binDir, fluxdBin string) error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	if running(dir) {
		fmt.Println("The local stack is already running.")
		printNext(dir, hasKubelet(dir))
		return nil
	}
	if localstack.OnlyFluxdDown(dir) {
		// fluxd was stopped (to try a take-over): start it again on its
		// state, keeping the demo.
		fmt.Println("stack: everything runs but fluxd; starting fluxd again on its state (the demo is kept)")
		return restartFluxd(ctx)
	}
	// A partly running stack: stop what is left and start afresh. A
	// brand-new clone or a clean 'make down' leaves nothing running, and
	// then there is nothing to say.
	left, err := localstack.Running(dir)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		fmt.Printf("stack: a partial stack runs from .stack/ (%s); stopping it and starting afresh (its demo state is discarded)\n", strings.Join(left, ", "))
	}
	if _, err := localstack.StopDir(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	start := time.Now()
	st, err := localstack.Start(ctx, localstack.Options{Dir: dir, BinDir: binDir, Detach: true, Log: os.Stdout, RealNode: localstack.RealNodeWanted()})
	if err != nil {
		return fmt.Errorf("%w\n(logs are in %s/logs; 'make down' stops what started)", err, dir)
	}
	// fluxd in a pod on the real node; with DB=postgres it stays a
	// process (the pod's install has no PostgreSQL wiring here yet).
	if db := os.Getenv("DB"); st.HasRealNode() && (db == "" || db == "sqlite") {
		return upWithPod(ctx, st, dir, binDir, start)
	}
	fluxdBin, err = filepath.Abs(fluxdBin)
	if err != nil {
		return err
	}
	metrics, err := localstack.FreeAddr()
	if err != nil {
		return err
	}
	webhook, err := localstack.FreeAddr()
	if err != nil {
		return err
	}
	web, err := localstack.FreeAddr()
	if err != nil {
		return err
	}
	secret, err := randomSecret()
	if err != nil {
		return err
	}
	// DB=postgres: fluxd keeps its records in a PostgreSQL server of the
	// stack's, not in a SQLite file in its state directory.
	var dbFlags, dbEnv []string
	switch db := os.Getenv("DB"); db {
	case "", "sqlite":
	case "postgres", "postgresql":
		t := time.Now()
		srv, url, err := st.StartPostgres(ctx)
		if err != nil {
			return fmt.Errorf("starting PostgreSQL: %w\n(logs are in %s/logs; 'make down' stops what started)", err, dir)
		}
		fmt.Printf("stack: %-34s ready in %v\n", "PostgreSQL", time.Since(t).Round(10*time.Millisecond))
		dbFlags = []string{"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile()}
		dbEnv = []string{"export FLUXD_HISTORY_DB=" + url, "export FLUXD_HISTORY_DB_PASSWORD_FILE=" + srv.PasswordFile()}
	default:
		return fmt.Errorf("DB=%s: use DB=sqlite (the default) or DB=postgres", db)
	}
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		return err
	}
	f, err := st.StartFluxd(ctx, fluxdBin, instance, append([]string{"--log-format=text", "--metrics-listen=" + metrics,
		"--webhook-listen=" + webhook, "--webhook-secret-file=" + secretFile, "--web-listen=" + web,
		// The demo keeps the cluster equal to git (docs/sync.md): its
		// fluxd has the stack's admin credentials, which the sync needs.
		"--sync-interval=1m"}, dbFlags...)...)
	if err != nil {
		return fmt.Errorf("%w\n(logs are in %s/logs; 'make down' stops what started)", err, dir)
	}
	if err := localstack.RecordFluxd(dir, f.PID); err != nil {
		return err
	}
	root := filepath.Dir(dir)
	env := []string{
		"# Written by 'make up'. Source it: . .stack/env",
		"export FLUX_URL=" + f.Addr,
		"export FLUX_TOKEN=" + f.Tokens["admin"],
		"export FLUX_VIEWER_TOKEN=" + f.Tokens["viewer"],
		"export FLUX_DEPLOYER_TOKEN=" + f.Tokens["deployer"],
		"export FLUX_METRICS_URL=http://" + metrics + "/metrics",
		"export FLUX_WEBHOOK_URL=http://" + webhook + "/v1/notify",
		"export FLUX_WEBHOOK_SECRET=" + secret,
		"export FLUX_WEB_URL=http://" + web, // no trailing slash: $FLUX_WEB_URL/api/... is a path
		"export KUBECONFIG=" + st.Kubeconfig,
		"export REGISTRY=" + st.Registry,
		"export GIT_URL=" + st.GitURL,
		"export GIT_BRANCH=" + st.GitBranch,
		"export GIT_PATH=" + st.GitPath,
		"export PATH=" + filepath.Join(root, "bin") + ":" + binDir + ":$PATH",
	}
	env = append(env, dbEnv...)
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Printf("stack: everything up in %v\n\n", time.Since(start).Round(100*time.Millisecond))
	fmt.Printf("The status page: http://%s/ (FLUX_WEB_URL; sign in with $FLUX_TOKEN, or $FLUX_VIEWER_TOKEN to only look)\n\n", web)
	printNext(dir, st.HasRealNode())
	if len(dbEnv) > 0 {
		fmt.Println(`The history is in PostgreSQL: PGPASSWORD=$(cat $FLUXD_HISTORY_DB_PASSWORD_FILE) psql "$FLUXD_HISTORY_DB"`)
	}
	return nil
}

// running reports whether every component of a stack under dir runs.
func running(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "env")); err != nil {
		return false
	}
	missing, err := localstack.NotRunning(dir)
	return err == nil && len(missing) == 0
}

func randomSecret() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// hasKubelet reports whether the stack under dir runs the real node.
func hasKubelet(dir string) bool {
	up, err := localstack.Running(dir)
	return err == nil && slices.Contains(up, "kubelet")
}

// printNext prints what to type next; realNode says whether the stack
// runs the real node (FLUXD_STACK_REAL_NODE=0 starts fake nodes only).
func printNext(dir string, realNode bool) {
	nodes := "kubectl get nodes -o wide        # the fake kwok nodes and the real one (containerd)"
	if !realNode {
		nodes = "kubectl get nodes -o wide        # the fake kwok nodes (no real node: FLUXD_STACK_REAL_NODE=0, or this machine lacks one)"
	}
	fmt.Printf(`Next, in this shell:
  . .stack/env                      # sets FLUX_URL, FLUX_TOKEN, FLUX_WEB_URL, KUBECONFIG, REGISTRY, GIT_URL, PATH (README: more)
  fluxctl version                   # client and server versions
  echo $FLUX_WEB_URL                # the status page: open it, sign in with $FLUX_TOKEN
  fluxctl list-services             # the example workloads, from the cluster and git
  fluxctl list-images helloworld    # tags in the registry, newest first
  fluxctl release --all --update-all-images --dry-run
  fluxctl release --all --update-all-images -m "first release"
  fluxctl history
  fluxctl policy helloworld --automate --tag-all 'semver:^1'   # fluxd releases each newer 1.x itself; try one:
  crane copy $REGISTRY/helloworld:1.2.0 $REGISTRY/helloworld:1.3.0 && fluxctl notify $REGISTRY/helloworld:1.3.0
  %s
  kubectl get pods                  # pods rolled out on them
  grpcurl -H "authorization: Bearer $FLUX_TOKEN" -plaintext $FLUX_URL list
  git clone $GIT_URL /tmp/manifests # the manifests fluxd releases through
  curl -s $FLUX_METRICS_URL | grep fluxd_registry   # Prometheus metrics
Logs are in %s/logs. Restart fluxd alone (SIGTERM, then start again on
its state, as an operator does) with: make restart-fluxd. Stop everything
with: make down
`, nodes, dir)
}

// restartFluxd stops the demo's fluxd (SIGTERM) if it runs and starts it
// again on its state: a job it was running is taken over. Flags given
// are added to its command line (a flag of the same name replaced), and
// kept for the next restart.
func restartFluxd(ctx context.Context, flags ...string) error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	// Only fluxd is restarted: against a stack that is down it would
	// start, fail to reach the cluster and leave a stale PID file.
	missing, err := localstack.NotRunning(dir)
	if err != nil {
		return err
	}
	for _, m := range missing {
		if m != "fluxd" {
			return fmt.Errorf("the stack is not running (down: %s): run make up", strings.Join(missing, ", "))
		}
	}
	start := time.Now()
	if ns := localstack.FluxdPodNamespace(dir); ns != "" {
		if len(flags) > 0 {
			return fmt.Errorf("fluxd runs in a pod on the real node, whose flags are its Deployment's: ARGS (%s) is for a fluxd process; start the demo with FLUXD_STACK_REAL_NODE=0 make up, or edit the Deployment (kubectl -n %s edit deployment)", strings.Join(flags, " "), ns)
		}
		pod, err := localstack.RestartFluxdPod(ctx, dir, ns)
		if err != nil {
			return err
		}
		fmt.Printf("stack: fluxd's pod deleted (SIGTERM) and replaced by %s, Ready in %v, on the same state: jobs it left are taken over ('fluxctl jobs'); logs: kubectl -n %s logs %s\n",
			pod, time.Since(start).Round(100*time.Millisecond), ns, pod)
		return nil
	}
	addr, err := localstack.RestartFluxdWith(ctx, dir, flags)
	if err != nil {
		return err
	}
	fmt.Printf("stack: fluxd started again on %s in %v, on its state: jobs it left are taken over ('fluxctl jobs'); log: %s\n",
		addr, time.Since(start).Round(100*time.Millisecond), filepath.Join(dir, "logs", "fluxd.log"))
	return nil
}

func down() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	stopped, err := localstack.StopDir(dir)
	if err != nil {
		return err
	}
	if len(stopped) == 0 {
		fmt.Println("stack: nothing was running")
		return nil
	}
	fmt.Println("stack: stopped", strings.Join(stopped, ", "))
	return nil
}
