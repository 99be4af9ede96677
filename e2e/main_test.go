package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
)

var (
	stack  *localstack.Stack
	binDir string // fluxd and fluxctl, built from this tree

	fluxdOnce     sync.Once
	fluxd         *localstack.Fluxd
	fluxdErr      error
	metricsAddr   string // the shared fluxd's Prometheus endpoint
	webhookAddr   string // the shared fluxd's webhook endpoint
	sharedWebAddr string // the shared fluxd's status page
)

// webhookSecret is the shared fluxd's webhook secret.
const webhookSecret = "e2e-webhook-secret"

const instance = "e2e"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: -short: the stack is not started and the end-to-end tests skip")
		os.Exit(m.Run())
	}
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		// Listing the tests (hack/e2eshard deals them out) needs no stack.
		os.Exit(m.Run())
	}
	// FLUXD_E2E_BIN: fluxd and fluxctl already built from this tree, shared
	// by the shards make test runs side by side (hack/e2eshard).
	dir, built := os.Getenv("FLUXD_E2E_BIN"), false
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "fluxd-e2e-bin-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		built = true
		root, err := localstack.ModuleRoot()
		if err == nil {
			err = localstack.BuildBinaries(context.Background(), root, dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
	}
	binDir = dir
	code := localstack.RunTests(m, &stack)
	pgserver.StopShared()
	if built {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// sharedFluxd starts one fluxd for the test binary, on first use.
func sharedFluxd(t *testing.T) *localstack.Fluxd {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	fluxdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if metricsAddr, fluxdErr = localstack.FreeAddr(); fluxdErr != nil {
			return
		}
		if webhookAddr, fluxdErr = localstack.FreeAddr(); fluxdErr != nil {
			return
		}
		if sharedWebAddr, fluxdErr = localstack.FreeAddr(); fluxdErr != nil {
			return
		}
		secretFile := filepath.Join(stack.Dir, "webhook-secret")
		localstack.NoteSecret("the shared fluxd's webhook secret", webhookSecret)
		if fluxdErr = os.WriteFile(secretFile, []byte(webhookSecret+"\n"), 0o600); fluxdErr != nil {
			return
		}
		// Short automation waits, so the automation test needs no long sleeps.
		fluxd, fluxdErr = stack.StartFluxd(ctx, filepath.Join(binDir, "fluxd"), instance,
			"--automation-short-wait=1s", "--automation-long-wait=2s", "--git-poll-interval=2s",
			"--metrics-listen="+metricsAddr, "--webhook-listen="+webhookAddr, "--webhook-secret-file="+secretFile, "--web-listen="+sharedWebAddr)
	})
	if fluxdErr != nil {
		t.Fatalf("starting fluxd: %v\nits log: %s", fluxdErr, stack.Log("fluxd"))
	}
	return fluxd
}

// dial opens a real gRPC connection to fluxd over loopback TCP.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
