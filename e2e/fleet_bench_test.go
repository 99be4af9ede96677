package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/memlimit"
	"github.com/fluxd/fluxd/internal/pgserver"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// BenchmarkFleet runs several fluxds on one PostgreSQL store, as clusters
// sharing a store do (docs/promotion.md, "Across clusters"), on the one
// local cluster: each with its own --cluster-name, its own namespaces
// (--namespaces) and its own --git-path in the stack's one git
// repository, and its own workloads. BENCH_FLEET is the workloads per
// fluxd (default 2000), BENCH_FLEET_INSTANCES the fluxds (default 5).
// Fluxd i's workloads are Deployments (0 replicas: no pods) in
// BENCH_FLEET/100 namespaces fleet-N-i-ns-XXX, which the bench creates
// (as a platform team would), defined in git under fleet-N/cI/; all are
// automated under semver:^1 and run their repository's newest tag. The
// fleet shares BENCH_FLEET/10 repositories of BENCH_FLEET_TAGS tags
// (default 10): the same images run in every cluster, and the registry
// cache is the store's.
//
// All fluxds serve one instance ("e2e"), as the clusters of one
// pipeline do. Each runs with fluxd's default intervals, the install's
// soft memory limit, and --kube-api-qps=1000 (as BenchmarkScale).
//
// Phases, each measured at the store (pg_stat_database, WAL bytes,
// pg_stat_statements, the server's CPU from /proc, the tables' rows and
// pg_total_relation_size) and per fluxd (RSS, CPU):
//
//  1. start-up: the fluxds start together; until every one's first
//     automator pass has decided all its services and a sync through
//     the API has returned (the start-up sync applies everything);
//  2. the cluster settles: until the stack's controller-manager (at its
//     default 20 requests/s) has observed every new Deployment, which a
//     release's rollout would otherwise wait for;
//  3. releases: BENCH_FLEET_RELEASE_REPOS repositories (default 10) get
//     a new tag and every fluxd is told (NotifyImage); until every
//     automated workload of those repositories in every cluster is
//     recorded released;
//  4. steady: nothing changes for BENCH_FLEET_STEADY (default 3m).
//
// Then each fluxd's History (what the status page's History view shows)
// and list-services are read, to say what one fluxd shows of the others.
//
//	FLUXD_STACK_BIN=$(stack/build.sh) BENCH_FLEET=200 go test -run '^$' -bench BenchmarkFleet -benchtime 1x -timeout 120m ./e2e/
func BenchmarkFleet(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	cfg := fleetConfig{n: 2000, instances: 5, tags: 10, releaseRepos: 10, steady: 3 * time.Minute}
	envInt := func(name string, p *int, lo, hi int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				b.Fatalf("%s=%q: a number from %d to %d", name, v, lo, hi)
			}
			*p = n
		}
	}
	envInt("BENCH_FLEET", &cfg.n, 100, 100000)
	if cfg.n%100 != 0 {
		b.Fatalf("BENCH_FLEET=%d: the workloads per fluxd, a multiple of 100 (2000)", cfg.n)
	}
	envInt("BENCH_FLEET_INSTANCES", &cfg.instances, 1, 20)
	envInt("BENCH_FLEET_TAGS", &cfg.tags, 1, 1000)
	envInt("BENCH_FLEET_RELEASE_REPOS", &cfg.releaseRepos, 0, cfg.n/10)
	if v := os.Getenv("BENCH_FLEET_STEADY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			b.Fatalf("BENCH_FLEET_STEADY=%q: a duration (3m)", v)
		}
		cfg.steady = d
	}
	for b.Loop() {
		fleetRun(b, cfg)
	}
}

type fleetConfig struct {
	n, instances, tags, releaseRepos int
	steady                           time.Duration
}

// fleetMember is one fluxd of the fleet.
type fleetMember struct {
	i        int
	name     string
	cluster  string
	nsPrefix string
	metrics  string
	web      string // the status page's address
	f        *localstack.Fluxd
	client   fluxdv1.FluxServiceClient
}

func fleetRun(b *testing.B, cfg fleetConfig) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	n, k := cfg.n, cfg.instances
	repos := max(1, n/10)
	prefix := fmt.Sprintf("fleet-%d", n)
	repoName := func(r int) string { return fmt.Sprintf("%s/%s/app-%d", stack.Registry, prefix, r) }
	tag := func(i int) string { return fmt.Sprintf("1.0.%d", i) }
	kc := kubeClient(b)

	// The fleet's images, namespaces and git paths.
	start := time.Now()
	if err := pushScaleRepos(ctx, repos, cfg.tags, repoName, tag); err != nil {
		b.Fatal(err)
	}
	b.Logf("pushed %d repositories x %d tags in %v", repos, cfg.tags, time.Since(start).Round(time.Second))
	members := make([]*fleetMember, k)
	files := map[string]string{}
	for i := range k {
		m := &fleetMember{i: i, name: fmt.Sprintf("fluxd-fleet-%d-c%d", n, i), cluster: fmt.Sprintf("c%d", i), nsPrefix: fmt.Sprintf("%s-c%d-ns-", prefix, i)}
		members[i] = m
		for ns := range n / 100 {
			nsName := fmt.Sprintf("%s%03d", m.nsPrefix, ns)
			if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, metav1.CreateOptions{}); err != nil {
				b.Fatalf("creating namespace %s: %v", nsName, err)
			}
			var sb strings.Builder
			for j := range 100 {
				w := ns*100 + j
				fmt.Fprintf(&sb, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: %[2]s
  annotations:
    fluxd.io/automated: "true"
    fluxd.io/tag-all: "semver:^1"
spec:
  replicas: 0
  selector:
    matchLabels: {app: app-%[1]d}
  template:
    metadata:
      labels: {app: app-%[1]d}
    spec:
      containers:
        - name: app
          image: %[3]s:%[4]s
`, w, nsName, repoName(w%repos), tag(cfg.tags-1))
			}
			files[fmt.Sprintf("%s/%s/%s.yaml", prefix, m.cluster, nsName)] = sb.String()
		}
	}
	pushManifest(b, fmt.Sprintf("Add %d fluxds' %d workloads each for the fleet benchmark", k, n), files)

	// The store: a server of the bench's own, with pg_stat_statements.
	// In a directory whose log is kept after the run.
	pgDir := filepath.Join(os.TempDir(), fmt.Sprintf("fluxd-fleet-pg-%d", os.Getpid()))
	srv, err := pgserver.Start(ctx, pgserver.Options{Dir: pgDir})
	if err != nil {
		b.Fatalf("starting PostgreSQL: %v", err)
	}
	defer func() {
		_ = srv.Stop()
		// Its log is kept; its data is not.
		_ = os.RemoveAll(filepath.Join(pgDir, "data"))
	}()
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	defer func() {
		log, _ := os.ReadFile(filepath.Join(pgDir, "postgres.log"))
		var errs []string
		missing := 0
		for _, l := range strings.Split(string(log), "\n") {
			switch {
			case strings.Contains(l, "ERROR:  relation") && strings.Contains(l, "does not exist"):
				// The bench's first snapshot, before fluxd made the tables.
				missing++
			case strings.Contains(l, "ERROR:"):
				errs = append(errs, l)
			}
		}
		b.Logf("PostgreSQL's log (%s) holds %d ERROR lines besides %d of tables not made yet at the first snapshot\n%s",
			filepath.Join(pgDir, "postgres.log"), len(errs), missing, strings.Join(errs[:min(len(errs), 5)], "\n"))
	}()
	url, err := srv.CreateDatabase(ctx, "fluxd")
	if err != nil {
		b.Fatal(err)
	}
	st := &fleetStore{srv: srv, url: url}
	if err := st.enableStatements(ctx); err != nil {
		b.Logf("pg_stat_statements not available (%v): the per-statement table is left out", err)
	}
	if err := st.connect(ctx); err != nil {
		b.Fatal(err)
	}
	defer st.conn.Close(context.Background())

	limit, err := deploymentMemoryLimit()
	if err != nil {
		b.Fatal(err)
	}
	os.Setenv("GOMEMLIMIT", strconv.FormatInt(memlimit.Soft(limit, memlimit.DefaultRatio), 10))
	defer os.Unsetenv("GOMEMLIMIT")

	before := st.snapshot(b, ctx, members)
	t0 := time.Now()
	for _, m := range members {
		if m.metrics, err = localstack.FreeAddr(); err != nil {
			b.Fatal(err)
		}
		if m.web, err = localstack.FreeAddr(); err != nil {
			b.Fatal(err)
		}
		var nss []string
		for ns := range n / 100 {
			nss = append(nss, fmt.Sprintf("%s%03d", m.nsPrefix, ns))
		}
		args := []string{"--git-path=" + prefix + "/" + m.cluster, "--cluster-name=" + m.cluster, "--namespaces=" + strings.Join(nss, ","),
			"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile(),
			"--metrics-listen=" + m.metrics, "--web-listen=" + m.web, "--kube-api-qps=1000", "--kube-api-burst=1000", "--sync-timeout=30m",
			// The install does not sync by default (fluxd applies what
			// it releases); a fleet applies its git path every 5 min,
			// the flag's own example.
			"--sync-interval=5m"}
		m.f, err = stack.StartNamedFluxd(ctx, m.name, filepath.Join(binDir, "fluxd"), instance, nil, args...)
		if err != nil {
			b.Fatalf("starting %s: %v (log: %s)", m.name, err, stack.Log(m.name))
		}
		f := m.f
		// Started here: stopped here.
		defer f.Stop(syscall.SIGTERM, 10*time.Second)
		m.client = fluxdv1.NewFluxServiceClient(dial(b, m.f.Addr))
	}
	os.Unsetenv("GOMEMLIMIT")

	// 1. Start-up: every automator's first pass, then a sync through the
	// API on each (it returns once the start-up sync's work is applied).
	passes := make([]time.Duration, k)
	syncs := make([]time.Duration, k)
	var peakMu sync.Mutex
	peak := make([]float64, k)
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range members {
		g.Go(func() error {
			for {
				peakMu.Lock()
				peak[m.i] = max(peak[m.i], rssMB(m.f.PID))
				peakMu.Unlock()
				// Not metricTotal: b.Fatal may not be called from
				// this goroutine, and the metrics listener may not be
				// up yet.
				if d, err := fleetMetric(m.metrics, "fluxd_automation_decisions_total"); err == nil && d >= float64(n) {
					passes[m.i] = time.Since(t0)
					break
				}
				if time.Since(t0) > 40*time.Minute {
					return fmt.Errorf("%s: after 40 min its automator has not decided all %d services (log: %s)", m.name, n, stack.Log(m.name))
				}
				select {
				case <-gctx.Done():
					return gctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
			sctx, cancel := context.WithTimeout(withToken(gctx, m.f.Tokens["admin"]), 40*time.Minute)
			defer cancel()
			s := time.Now()
			resp, err := m.client.Sync(sctx, &fluxdv1.SyncRequest{})
			if err != nil || resp.GetError() != "" {
				return fmt.Errorf("%s: sync: %v %s (log: %s)", m.name, err, resp.GetError(), stack.Log(m.name))
			}
			syncs[m.i] = time.Since(s)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	startup := time.Since(t0)
	afterStart := st.snapshot(b, ctx, members)
	for i, m := range members {
		afterStart.fluxd[i].peakRSS = max(peak[i], afterStart.fluxd[i].rss)
		if got := countDeployments(b, ctx, m.nsPrefix, n); got != n {
			b.Errorf("%s: %d of its %d Deployments are in the cluster after its sync", m.name, got, n)
		}
	}

	// The stack's controller-manager (at its default client rate, 20
	// requests/s) works through the new Deployments for minutes after
	// the syncs; a release's rollout waits for it. The releases start
	// once it has observed every Deployment, so that they measure fluxd
	// and its store rather than that backlog.
	t1 := time.Now()
	for _, m := range members {
		for !allObserved(b, ctx, m.nsPrefix, n) {
			if time.Since(t1) > 40*time.Minute {
				b.Fatalf("after 40 min the controller-manager has not observed all Deployments of %s", m.name)
			}
			time.Sleep(5 * time.Second)
		}
	}
	settle := time.Since(t1)
	afterSettle := st.snapshot(b, ctx, members)

	// 2. Releases: new tags on some repositories, every fluxd told.
	var releases time.Duration
	afterRelease := afterSettle
	if cfg.releaseRepos > 0 {
		img, err := random.Image(256, 1)
		if err != nil {
			b.Fatal(err)
		}
		for r := range cfg.releaseRepos {
			ref, err := name.NewTag(repoName(r)+":"+tag(cfg.tags), name.Insecure)
			if err == nil {
				err = remote.Write(ref, img, remote.WithContext(ctx))
			}
			if err != nil {
				b.Fatalf("pushing %s:%s: %v", repoName(r), tag(cfg.tags), err)
			}
		}
		want := int64(k * cfg.releaseRepos * (n / repos))
		t1 = time.Now()
		for _, m := range members {
			for r := range cfg.releaseRepos {
				if _, err := m.client.NotifyImage(withToken(ctx, m.f.Tokens["admin"]), &fluxdv1.NotifyImageRequest{Image: repoName(r) + ":" + tag(cfg.tags)}); err != nil {
					b.Fatalf("%s: notify-image %s: %v", m.name, repoName(r), err)
				}
			}
		}
		var got int64
		for {
			got = st.releasedServices(b, ctx, prefix+"-c")
			if got >= want || time.Since(t1) > 15*time.Minute {
				break
			}
			time.Sleep(5 * time.Second)
		}
		releases = time.Since(t1)
		if got < want {
			b.Errorf("releases: after %v the store holds %d automated releases of services, want %d (logs: %s)", releases.Round(time.Second), got, want, stack.Log(members[0].name))
		}
		b.Logf("releases: %d services released across %d fluxds in %v", got, k, releases.Round(100*time.Millisecond))
		afterRelease = st.snapshot(b, ctx, members)
	}

	// 3. Steady: nothing changes.
	time.Sleep(cfg.steady)
	afterSteady := st.snapshot(b, ctx, members)

	// What one fluxd shows of the others: its History (the status
	// page's History view asks the same) and its list-services.
	var page strings.Builder
	fmt.Fprintf(&page, "| fluxd | history: events (ms) | of them naming each fluxd's namespaces | list-services (ms) |\n|---|---|---|---|\n")
	for _, m := range members {
		vctx := withToken(ctx, m.f.Tokens["viewer"])
		s := time.Now()
		h, err := m.client.History(vctx, &fluxdv1.HistoryRequest{Limit: 1000})
		hms := time.Since(s)
		if err != nil {
			b.Fatalf("%s: history: %v", m.name, err)
		}
		per := make([]int, k)
		for _, ev := range h.GetEvents() {
			seen := map[int]bool{}
			for _, svc := range ev.GetServices() {
				for _, o := range members {
					if strings.HasPrefix(svc, o.nsPrefix) {
						seen[o.i] = true
					}
				}
			}
			for i := range seen {
				per[i]++
			}
		}
		s = time.Now()
		ls, err := m.client.ListServices(vctx, &fluxdv1.ListServicesRequest{})
		lms := time.Since(s)
		if err != nil {
			b.Fatalf("%s: list-services: %v", m.name, err)
		}
		var perS []string
		for i, c := range per {
			perS = append(perS, fmt.Sprintf("c%d %d", i, c))
		}
		fmt.Fprintf(&page, "| %s | %d (%.0f) | %s | %d services (%.0f) |\n", m.cluster, len(h.GetEvents()), float64(hms.Microseconds())/1000, strings.Join(perS, ", "), len(ls.GetServices()), float64(lms.Microseconds())/1000)
	}

	fmt.Printf("\nBenchmarkFleet: %d fluxds x %d workloads (%d repositories x %d tags, shared), one PostgreSQL\n", k, n, repos, cfg.tags)
	fmt.Printf("start-up %.1f s (first automator passes %s; syncs through the API after them %s); the controller-manager observes every Deployment %.1f s later; releases %.1f s; steady %v\n\n",
		startup.Seconds(), durations(passes), durations(syncs), settle.Seconds(), releases.Seconds(), cfg.steady)
	fmt.Println("The store, per phase:")
	fmt.Println(fleetPhaseHeader)
	fmt.Println(fleetPhaseRow("start-up", before, afterStart))
	fmt.Println(fleetPhaseRow("cluster settles", afterStart, afterSettle))
	if cfg.releaseRepos > 0 {
		fmt.Println(fleetPhaseRow("releases", afterSettle, afterRelease))
	}
	fmt.Println(fleetPhaseRow("steady", afterRelease, afterSteady))
	fmt.Println("\nThe tables (rows; bytes with indexes and TOAST), after each phase:")
	fmt.Println(fleetTablesTable([]string{"start", "start-up", "releases", "steady"}, []fleetSnap{before, afterStart, afterRelease, afterSteady}))
	fmt.Println("\nEach fluxd (RSS now / peak in start-up; CPU seconds cumulative; its rows in events / event_services):")
	fmt.Println(fleetMembersTable(members, afterStart, afterRelease, afterSteady))
	if len(afterStart.statements) > 0 || len(afterSteady.statements) > 0 {
		fmt.Println("\nThe statements of the whole run, by total time (pg_stat_statements):")
		fmt.Println(fleetStatementsTable(afterSteady.statements))
	}
	fmt.Println("\nWhat each fluxd shows (History limit 1000, as viewer; list-services):")
	fmt.Println(page.String())

	el := afterSteady.at.Sub(before.at).Seconds()
	b.ReportMetric(afterSteady.cpu-before.cpu, "pg-cpu-s")
	b.ReportMetric(float64(afterSteady.xact-before.xact)/el, "pg-xact/s")
	b.ReportMetric(float64(afterSteady.tables["events"].bytes+afterSteady.tables["event_services"].bytes)/(1<<20), "events-MB")
	b.ReportMetric(startup.Seconds(), "startup-s")
}

// fleetStore is the bench's own view of the PostgreSQL server.
type fleetStore struct {
	srv        *pgserver.Server
	url        string
	conn       *pgx.Conn
	statements bool
}

func (s *fleetStore) connect(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(s.url)
	if err != nil {
		return err
	}
	cfg.Password = s.srv.Password
	cfg.RuntimeParams["application_name"] = "bench"
	s.conn, err = pgx.ConnectConfig(ctx, cfg)
	return err
}

// enableStatements loads pg_stat_statements (a restart) and creates it in
// the fluxd database.
func (s *fleetStore) enableStatements(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	_, err := s.conn.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`)
	s.conn.Close(ctx)
	if err != nil {
		return err
	}
	if err := s.srv.Restart(ctx, 0); err != nil {
		return err
	}
	if err := s.connect(ctx); err != nil {
		return err
	}
	defer s.conn.Close(ctx)
	if _, err := s.conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return err
	}
	s.statements = true
	return nil
}

type fleetTable struct{ rows, bytes int64 }

type fleetStatement struct {
	query      string
	calls      int64
	totalMS    float64
	rows       int64
	sharedHits int64
}

type fleetFluxd struct {
	rss, peakRSS, cpu     float64
	events, eventServices int64
}

type fleetSnap struct {
	at                                   time.Time
	xact, rollback                       int64
	inserted, updated, deleted           int64
	fetched, returned, blksRead, blksHit int64
	walBytes                             int64
	cpu                                  float64 // the server's, seconds
	calls                                int64
	tables                               map[string]fleetTable
	statements                           []fleetStatement
	fluxd                                []fleetFluxd
}

var fleetTables = []string{"events", "event_services", "live_events", "jobs", "job_log", "outbox", "registry_tags", "registry_images", "promotion_records"}

func (s *fleetStore) snapshot(b *testing.B, ctx context.Context, members []*fleetMember) fleetSnap {
	b.Helper()
	sn := fleetSnap{at: time.Now(), tables: map[string]fleetTable{}}
	err := s.conn.QueryRow(ctx, `/* bench */ SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_fetched, tup_returned, blks_read, blks_hit,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&sn.xact, &sn.rollback, &sn.inserted, &sn.updated, &sn.deleted, &sn.fetched, &sn.returned, &sn.blksRead, &sn.blksHit, &sn.walBytes)
	if err != nil {
		b.Fatalf("reading pg_stat_database: %v", err)
	}
	for _, t := range fleetTables {
		var ft fleetTable
		// A table a schema version does not have is left out.
		if err := s.conn.QueryRow(ctx, `/* bench */ SELECT count(*), pg_total_relation_size('`+t+`') FROM `+t).Scan(&ft.rows, &ft.bytes); err == nil {
			sn.tables[t] = ft
		}
	}
	if s.statements {
		rows, err := s.conn.Query(ctx, `/* bench */ SELECT query, calls, total_exec_time, rows, shared_blks_hit FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '/* bench */%' ORDER BY total_exec_time DESC`)
		if err == nil {
			for rows.Next() {
				var st fleetStatement
				if err := rows.Scan(&st.query, &st.calls, &st.totalMS, &st.rows, &st.sharedHits); err == nil {
					sn.statements = append(sn.statements, st)
					sn.calls += st.calls
				}
			}
			rows.Close()
		}
	}
	sn.cpu = processTreeCPU(s.srv.PID())
	for _, m := range members {
		var fx fleetFluxd
		if m.f != nil {
			fx.rss = rssMB(m.f.PID)
			fx.cpu = metricTotal(b, m.metrics, "process_cpu_seconds_total")
		}
		_ = s.conn.QueryRow(ctx, `/* bench */ SELECT count(DISTINCT event_id), count(*) FROM event_services WHERE service LIKE $1`, m.nsPrefix+"%").Scan(&fx.events, &fx.eventServices)
		sn.fluxd = append(sn.fluxd, fx)
	}
	return sn
}

// releasedServices counts the services of automated releases whose
// namespace starts with prefix.
func (s *fleetStore) releasedServices(b *testing.B, ctx context.Context, prefix string) int64 {
	var n int64
	if err := s.conn.QueryRow(ctx, `/* bench */ SELECT count(*) FROM event_services es JOIN events e ON e.id = es.event_id
		WHERE e.type = 'automated-release' AND es.service LIKE $1`, prefix+"%").Scan(&n); err != nil {
		b.Fatalf("counting released services: %v", err)
	}
	return n
}

// processTreeCPU is the CPU time (user and system, seconds) of a process,
// its live children, and its children that exited and were waited for
// (PostgreSQL's postmaster waits for every backend).
func processTreeCPU(pid int) float64 {
	ticks := func(p int) (own, children float64, ppid int) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return 0, 0, -1
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, 0, -1
		}
		f := strings.Fields(s[i+1:])
		// f[0] is the state (field 3): utime is field 14, stime 15,
		// cutime 16, cstime 17; ppid is field 4.
		if len(f) < 15 {
			return 0, 0, -1
		}
		v := func(k int) float64 { x, _ := strconv.ParseFloat(f[k-3], 64); return x }
		pp, _ := strconv.Atoi(f[1])
		return v(14) + v(15), v(16) + v(17), pp
	}
	own, children, _ := ticks(pid)
	total := own + children
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if o, _, pp := ticks(p); pp == pid {
			total += o
		}
	}
	return total / 100 // USER_HZ
}

func countDeployments(b *testing.B, ctx context.Context, nsPrefix string, n int) int {
	kc := kubeClient(b)
	got := 0
	for ns := range n / 100 {
		l, err := kc.AppsV1().Deployments(fmt.Sprintf("%s%03d", nsPrefix, ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		got += len(l.Items)
	}
	return got
}

// fleetMetric is metricTotal for a goroutine: the error instead of b.Fatal.
func fleetMetric(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, _ := strconv.ParseFloat(l[i+1:], 64)
			sum += v
		}
	}
	return sum, nil
}

// allObserved reports whether the deployment controller has observed
// every Deployment in the namespaces (its status at their generation).
func allObserved(b *testing.B, ctx context.Context, nsPrefix string, n int) bool {
	kc := kubeClient(b)
	for ns := range n / 100 {
		l, err := kc.AppsV1().Deployments(fmt.Sprintf("%s%03d", nsPrefix, ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range l.Items {
			if d.Status.ObservedGeneration < d.Generation {
				return false
			}
		}
	}
	return true
}

func durations(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f–%.1f s", s[0].Seconds(), s[len(s)-1].Seconds())
}

const fleetPhaseHeader = "| phase | seconds | server CPU s (% of one core) | commits/s | statements/s | rows inserted / updated / deleted | rows fetched | WAL written | blocks hit / read |\n|---|---|---|---|---|---|---|---|---|"

func fleetPhaseRow(name string, a, z fleetSnap) string {
	el := z.at.Sub(a.at).Seconds()
	calls := "-"
	if z.calls > 0 {
		calls = fmt.Sprintf("%.0f", float64(z.calls-a.calls)/el)
	}
	cpu := z.cpu - a.cpu
	return fmt.Sprintf("| %s | %.0f | %.1f (%.0f%%) | %.1f | %s | %d / %d / %d | %d | %.1f MB | %d / %d |",
		name, el, cpu, 100*cpu/el, float64(z.xact-a.xact)/el, calls, z.inserted-a.inserted, z.updated-a.updated, z.deleted-a.deleted,
		z.fetched-a.fetched, float64(z.walBytes-a.walBytes)/(1<<20), z.blksHit-a.blksHit, z.blksRead-a.blksRead)
}

func fleetTablesTable(names []string, snaps []fleetSnap) string {
	var sb strings.Builder
	sb.WriteString("| table |")
	for _, n := range names {
		sb.WriteString(" " + n + " |")
	}
	sb.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, t := range fleetTables {
		if _, ok := snaps[len(snaps)-1].tables[t]; !ok {
			continue
		}
		sb.WriteString("| " + t + " |")
		for _, s := range snaps {
			ft := s.tables[t]
			fmt.Fprintf(&sb, " %d (%s) |", ft.rows, sizeOf(ft.bytes))
		}
		sb.WriteString("\n")
	}
	return strings.TrimRight(sb.String(), "\n")
}

func sizeOf(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%d kB", b>>10)
	}
}

func fleetMembersTable(members []*fleetMember, s ...fleetSnap) string {
	var sb strings.Builder
	sb.WriteString("| fluxd | RSS after start-up (peak) | after releases | after steady | CPU s after start-up / releases / steady | events / event_services rows |\n|---|---|---|---|---|---|\n")
	for i, m := range members {
		a, r, z := s[0].fluxd[i], s[1].fluxd[i], s[2].fluxd[i]
		fmt.Fprintf(&sb, "| %s | %.0f MB (%.0f MB) | %.0f MB | %.0f MB | %.1f / %.1f / %.1f | %d / %d |\n", m.cluster, a.rss, a.peakRSS, r.rss, z.rss, a.cpu, r.cpu, z.cpu, z.events, z.eventServices)
	}
	return strings.TrimRight(sb.String(), "\n")
}

func fleetStatementsTable(sts []fleetStatement) string {
	var sb strings.Builder
	sb.WriteString("| statement | calls | total ms | rows | blocks hit |\n|---|---|---|---|---|\n")
	for i, st := range sts {
		if i == 12 {
			break
		}
		q := strings.Join(strings.Fields(st.query), " ")
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		q = strings.ReplaceAll(q, "|", "\\|")
		fmt.Fprintf(&sb, "| `%s` | %d | %.0f | %d | %d |\n", q, st.calls, st.totalMS, st.rows, st.sharedHits)
	}
	return strings.TrimRight(sb.String(), "\n")
}
