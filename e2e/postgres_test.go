package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fluxd/fluxd/history"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
)

// jobNow is jobOf that reports a failed listing instead of failing the
// test: while the database restarts, a listing may fail.
func jobNow(t *testing.T, env []string, id string) (jobJSON, error) {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "jobs", "-o", "json")
	var jobs []jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
		return jobJSON{}, fmt.Errorf("jobs: exit %d: %s%s", code, out, stderr)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return jobJSON{}, fmt.Errorf("job %s is not listed", id)
}

// pgFluxd starts a server of the test's own (so it can be restarted), a
// database on it, and a fluxd on that database: with the password in a
// file, or (down: the server is stopped first) inline in the URL.
func pgFluxd(t *testing.T, name, dir string, down bool, extra ...string) (*localstack.Fluxd, *pgserver.Server, string) {
	t.Helper()
	srv := pgserver.Own(t)
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	url, err := srv.CreateDatabase(context.Background(), "fluxd")
	if err != nil {
		t.Fatal(err)
	}
	if down {
		if err := srv.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	db := []string{"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile()}
	if down {
		// The password inline in the URL this time, so that the checks
		// that it is never shown (/readyz, the log) can fail.
		db = []string{"--history-db=" + strings.Replace(url, srv.User+"@", srv.User+":"+srv.Password+"@", 1)}
	}
	f := startFaultFluxd(t, name, dir, nil, append(append([]string{"--git-poll-interval=10m"}, db...), extra...)...)
	return f, srv, url
}

// TestPostgresRestartsDuringAJob restarts the PostgreSQL server (down for
// 2 s) while a release rolls out: fluxd reconnects, the job succeeds, and
// the database holds the job as succeeded and the release in history.
func TestPostgresRestartsDuringAJob(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "faults-pg", "pgapp", 2, 3, "1.1.0")
	f, srv, url := pgFluxd(t, "fluxd-pg", "faults-pg", false)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=pia"}
	before := remoteHead(t)
	id := releaseNoWait(t, env, "-s", "pgapp", "-i", img+"1.1.0", "--rollout-timeout", "120s")
	waitJob(t, env, id, 60*time.Second, rollingOut)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := srv.Restart(ctx, 2*time.Second); err != nil {
		t.Fatalf("restarting PostgreSQL: %v", err)
	}
	var j jobJSON
	if err := poll(ctx, 120*time.Second, func() error {
		var err error
		if j, err = jobNow(t, env, id); err != nil {
			return err
		}
		return ended(j)
	}); err != nil {
		t.Fatalf("%v\nlog: %s", err, stack.Log("fluxd-pg"))
	}
	if j.State != "succeeded" {
		t.Fatalf("job after a PostgreSQL restart: %+v\nlog: %s", j, stack.Log("fluxd-pg"))
	}
	waitRolledOut(t, kc, map[string][]string{"pgapp": {"app=" + img + "1.1.0"}})
	if got := commitsSince(t, before, "faults-pg"); len(got) != 1 || !strings.HasPrefix(got[0], "Release "+img+"1.1.0") {
		t.Errorf("commits: %q; want the release once", got)
	}
	if got := strings.Join(historyTypes(t, env, "pgapp"), " "); got != "release" {
		t.Errorf("history of pgapp: %q; want one release", got)
	}
	// What a user would find in the database itself.
	s, err := historystore.Open(ctx, historystore.Config{URL: url, PasswordFile: srv.PasswordFile()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saved, err := s.Job(ctx, instance, id)
	if err != nil || saved.State != history.JobSucceeded || saved.Commit == "" {
		t.Errorf("the job in PostgreSQL: %+v, %v; want succeeded with its commit", saved, err)
	}
	evs, err := s.Events(ctx, instance, history.Query{Service: "default:deployment/pgapp"})
	if err != nil || len(evs) != 1 || evs[0].Type != history.Release {
		t.Errorf("pgapp's history in PostgreSQL: %+v, %v; want one release", evs, err)
	}
}

// TestPostgresDownAtStart starts fluxd while its PostgreSQL server is
// down: fluxd runs, its readiness check says NOT_SERVING, history says
// the database is not connected yet; once the server is up, fluxd
// connects by itself, turns ready, and releases.
func TestPostgresDownAtStart(t *testing.T) {
	sharedFluxd(t)
	img := faultService(t, "faults-pgdown", "pgdownapp", 1, 0, "1.1.0")
	healthAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f, srv, _ := pgFluxd(t, "fluxd-pgdown", "faults-pgdown", true, "--health-listen="+healthAddr)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=pia"}
	ctx := testContext(t)
	health := healthpb.NewHealthClient(dial(t, f.Addr))
	status := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return resp.GetStatus()
	}
	if st := status(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health with the database down: %v; want NOT_SERVING", st)
	}
	// The probes' HTTP endpoint says which part is not ready, without the
	// password (inline in the URL here) or the server's address.
	// (With a token: without one it names the part only.)
	code, why := httpGetWith(t, "http://"+healthAddr+"/readyz", f.Tokens["viewer"])
	if code != http.StatusServiceUnavailable || !strings.Contains(why, "history database: not connected") ||
		strings.Contains(why, srv.Password) || strings.Contains(why, strconv.Itoa(srv.Port)) {
		t.Errorf("/readyz with the database down: %d %q; want 503 saying the history database is not connected, without its password or address", code, why)
	}
	if code, why := httpGet(t, "http://"+healthAddr+"/readyz"); code != http.StatusServiceUnavailable || why != "not ready: database\n" {
		t.Errorf("/readyz without a token, the database down: %d %q; want 503 %q only", code, why, "not ready: database")
	}
	if out, stderr, code := fluxctl(t, env, "history", "pgdownapp"); code == 0 || !strings.Contains(out+stderr, "not connected yet") {
		t.Errorf("history with the database down: exit %d\n%s%s\nwant a failure saying the database is not connected yet", code, out, stderr)
	}
	time.Sleep(2 * time.Second) // a few failed attempts
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 60*time.Second, func() error {
		if st := status(); st != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health: %v", st)
		}
		return nil
	}); err != nil {
		t.Fatalf("fluxd did not turn ready once PostgreSQL was up: %v\nlog: %s", err, stack.Log("fluxd-pgdown"))
	}
	id := releaseNoWait(t, env, "-s", "pgdownapp", "-i", img+"1.1.0")
	if j := waitJob(t, env, id, 90*time.Second, ended); j.State != "succeeded" {
		t.Fatalf("release once the database is up: %+v", j)
	}
	if got := strings.Join(historyTypes(t, env, "pgdownapp"), " "); got != "release" {
		t.Errorf("history of pgdownapp: %q; want one release", got)
	}
	log, _ := os.ReadFile(stack.Log("fluxd-pgdown"))
	for _, want := range []string{"cannot reach the history database; trying again", "connected to the history database"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("fluxd's log does not say %q", want)
		}
	}
}
