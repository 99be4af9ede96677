package syncer

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// Clone is the git working clone, as the release engine shares it.
type Clone interface {
	// Read runs fn on the clone under the git lock; with fetch, after
	// fetching the remote; quiet, without kicking a sync for a new
	// revision it fetched (a dry run's). rev is the clone's revision,
	// root its directory and paths the manifest sub-paths.
	Read(ctx context.Context, fetch, quiet bool, fn func(rev, root string, paths []string) error) error
	// Exclusive runs fn while no release or rollback pushes or applies:
	// a sync reads and applies git inside it, so it never applies a
	// revision older than one a release applied meanwhile.
	Exclusive(ctx context.Context, fn func() error) error
}

// Applier applies objects to the cluster (see kubesync.Applier).
type Applier interface {
	Apply(ctx context.Context, objs []platform.Object, opts platform.SyncOptions) ([]platform.ObjectResult, error)
}

// Recorder keeps history.
type Recorder interface {
	Record(ctx context.Context, ev history.Event) (int64, error)
}

// Config configures a Syncer.
type Config struct {
	// Interval is how often git is applied again though nothing changed
	// in it, undoing drift in the cluster. It must be positive.
	Interval time.Duration
	// Prune deletes what fluxd applied and has left git.
	Prune bool
	// Timeout bounds one sync; zero means five minutes.
	Timeout time.Duration
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, errors.New("--sync-interval must be positive"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("the sync timeout cannot be negative"))
	}
	return errors.Join(errs...)
}

// Report is one sync.
type Report struct {
	Revision string
	Started  time.Time
	Duration time.Duration
	DryRun   bool
	// Results are per object, sorted by object.
	Results []platform.ObjectResult
	// Problems are files and documents that could not be read, as
	// "file:line: why".
	Problems []string
	// Err is a failure of the sync as a whole; "" when it ran.
	Err string
	// Requests is how many requests the sync sent to the API server,
	// when the Applier counts them (see RequestCounter); -1 when not.
	Requests int64
}

// RequestCounter is an Applier that counts its requests to the API
// server (kubesync.Applier does).
type RequestCounter interface {
	Requests() int64
}

// Failed reports whether anything failed.
func (r *Report) Failed() bool {
	if r.Err != "" || len(r.Problems) > 0 {
		return true
	}
	for _, res := range r.Results {
		if res.Action == platform.ActionFailed {
			return true
		}
	}
	return false
}

// Count counts the results of one action.
func (r *Report) Count(action string) int {
	n := 0
	for _, res := range r.Results {
		if res.Action == action {
			n++
		}
	}
	return n
}

// Syncer runs syncs, one at a time.
type Syncer struct {
	cfg      Config
	clone    Clone
	applier  Applier
	recorder Recorder
	log      *slog.Logger

	kick    chan struct{} // "sync soon": a buffer of one, sends never block
	run     sync.Mutex    // one sync at a time
	running atomic.Bool   // Run is running: this replica leads
	// fetchNext makes Run's next sync fetch git first (Start).
	fetchNext atomic.Bool

	mu           sync.Mutex // guards the fields below
	kicked       string     // the revision of the last kick
	last         *Report    // the last real (not dry) sync
	lastRecorded string     // the failures of the last recorded failed sync
}

// New returns a Syncer. cfg must have passed Validate.
func New(cfg Config, clone Clone, applier Applier, recorder Recorder, log *slog.Logger) *Syncer {
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	return &Syncer{cfg: cfg, clone: clone, applier: applier, recorder: recorder, log: log.With("component", "sync"), kick: make(chan struct{}, 1)}
}

// Kick asks for a sync of revision rev soon (a fetch found it); kicks
// coalesce, and one for the revision the last sync applied is passed
// over (a Sync call's own fetch kicks for what it is about to apply).
func (s *Syncer) Kick(rev string) {
	s.mu.Lock()
	s.kicked = rev
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ErrNotRunning is a Start on a replica whose sync does not run.
var ErrNotRunning = errors.New("the sync does not run on this fluxd replica (it runs on the leader)")

// Start asks Run for a sync soon, git fetched first, and returns at
// once: its outcome goes to the history and Last like any other sync's.
func (s *Syncer) Start() error {
	if !s.Running() {
		return ErrNotRunning
	}
	s.fetchNext.Store(true)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Running reports whether Run runs: on the leader only, with
// --leader-elect.
func (s *Syncer) Running() bool { return s.running.Load() }

// Run syncs at once, then on every kick and every interval, until ctx
// ends.
func (s *Syncer) Run(ctx context.Context) {
	s.running.Store(true)
	defer s.running.Store(false)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
			if !s.fetchNext.Load() && s.synced() {
				continue // the timer keeps running
			}
		}
		if _, err := s.Sync(ctx, s.fetchNext.Swap(false), false); err != nil && ctx.Err() == nil {
			s.log.Warn("sync failed", "error", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(s.cfg.Interval)
	}
}

// Sync applies git to the cluster now (or, with dryRun, says what that
// would do), fetching the remote first when fetch is set. The error is
// for a sync that could not run at all (git unreadable); a sync that ran
// with failures returns them in its report.
func (s *Syncer) Sync(ctx context.Context, fetch, dryRun bool) (*Report, error) {
	s.run.Lock()
	defer s.run.Unlock()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if dryRun {
		return s.sync(parent, ctx, fetch, dryRun, nil)
	}
	var rep *Report
	var err error
	var xerr error
	// A release waiting to apply stops the sync between objects: the
	// release applies, then the sync starts again from git (which now
	// holds the release's commit), up to maxYields times.
	for yields := 0; ; yields++ {
		yield := s.yielder(yields)
		xerr = s.clone.Exclusive(ctx, func() error {
			rep, err = s.sync(parent, ctx, fetch, dryRun, yield)
			return nil
		})
		if xerr != nil || !errors.Is(err, platform.ErrPreempted) {
			break
		}
		s.log.Debug("the sync stopped between objects for a release; syncing again after it", "applied", rep.Count(platform.ActionCreated)+rep.Count(platform.ActionChanged))
		fetch = false
	}
	if xerr != nil {
		rep = &Report{Started: time.Now(), Err: xerr.Error()}
		if parent.Err() == nil {
			s.finish(ctx, rep)
		}
		return rep, xerr
	}
	return rep, err
}

// sync is one sync; a real one runs inside the clone's Exclusive.
func (s *Syncer) sync(parent, ctx context.Context, fetch, dryRun bool, yield func() bool) (*Report, error) {
	rep := &Report{Started: time.Now(), DryRun: dryRun}
	var objs *gitrepo.Objects
	err := s.clone.Read(ctx, fetch, dryRun, func(rev, root string, paths []string) error {
		rep.Revision = rev
		if !dryRun {
			// This sync covers whatever fetch kicked one before it, under
			// the git lock, so no later commit's kick is lost.
			select {
			case <-s.kick:
			default:
			}
		}
		dirs, err := gitrepo.ResolvePaths(root, paths)
		if err != nil {
			return fluxerr.New(fluxerr.User, err, "")
		}
		objs, err = gitrepo.ReadObjects(root, dirs)
		return err
	})
	if err != nil {
		rep.Err = err.Error()
		rep.Duration = time.Since(rep.Started)
		if !dryRun && parent.Err() == nil {
			s.finish(ctx, rep)
		}
		return rep, err
	}
	for _, p := range objs.Problems {
		rep.Problems = append(rep.Problems, p.Error())
	}
	objs.Objects = leaveFluxdConfig(objs.Objects)
	// The objects were read for this sync alone: the applier may change
	// them rather than copy them.
	opts := platform.SyncOptions{Prune: s.cfg.Prune, DryRun: dryRun, Yield: yield, Owned: true}
	if len(rep.Problems) > 0 {
		opts.NoPrune = "some files could not be read, and their objects would look deleted"
	}
	rep.Requests = -1
	counter, counts := s.applier.(RequestCounter)
	var before int64
	if counts {
		before = counter.Requests()
	}
	rep.Results, err = s.applier.Apply(ctx, objs.Objects, opts)
	if counts {
		rep.Requests = counter.Requests() - before
	}
	if errors.Is(err, platform.ErrPreempted) {
		// Not a sync's end: the caller syncs again after the release.
		rep.Duration = time.Since(rep.Started)
		return rep, err
	}
	if err != nil {
		rep.Err = err.Error()
	}
	rep.Duration = time.Since(rep.Started)
	if parent.Err() != nil {
		// fluxd is stopping, or the caller left: what was cut short is
		// not a failure to record; the next sync does it all again.
		return rep, parent.Err()
	}
	if !dryRun {
		s.finish(ctx, rep)
	}
	return rep, nil
}

// finish keeps the report for Status, logs it, and records it in the
// history when it changed something, or failed differently from the last
// failure recorded (a failure repeated every interval is recorded once).
func (s *Syncer) finish(ctx context.Context, rep *Report) {
	changed := rep.Count(platform.ActionCreated) + rep.Count(platform.ActionChanged) + rep.Count(platform.ActionDeleted)
	d := detail(rep)
	msg, failures := d.Render(rep.Revision, d.Objects, true)
	s.mu.Lock()
	s.last = rep
	record := changed > 0 || failures != "" && failures != s.lastRecorded
	if record || failures == "" {
		s.lastRecorded = failures
	}
	s.mu.Unlock()
	attrs := []any{"revision", short(rep.Revision), "objects", len(rep.Results), "created", rep.Count(platform.ActionCreated),
		"changed", rep.Count(platform.ActionChanged), "deleted", rep.Count(platform.ActionDeleted), "duration", rep.Duration.Round(time.Millisecond), "requests", rep.Requests}
	switch {
	case rep.Failed():
		s.log.Warn("sync failed", append(attrs, "failures", failures)...)
	case changed > 0:
		s.log.Info("synced git to the cluster", attrs...)
	default:
		s.log.Debug("synced: nothing to change", attrs...)
	}
	if !record || s.recorder == nil {
		return
	}
	ev := history.Event{Instance: history.SyncInstance, Type: history.Sync, User: "fluxd", Commit: rep.Revision,
		Message: msg, Error: failures, Sync: d, Services: services(rep), StartedAt: rep.Started, EndedAt: rep.Started.Add(rep.Duration)}
	if _, err := s.recorder.Record(context.WithoutCancel(ctx), ev); err != nil {
		s.log.Warn("recording the sync in the history failed", "error", err)
	}
}

// maxYields bounds how often one sync stops for releases: a stream of
// releases must not starve it.
const maxYields = 50

// Contender is a Clone that tells whether a release waits to apply
// (release.Engine is one).
type Contender interface {
	DeployWaiting() bool
}

// yielder is the sync's Yield: whether a release waits, unless the sync
// yielded maxYields times already.
func (s *Syncer) yielder(yields int) func() bool {
	c, ok := s.clone.(Contender)
	if !ok || yields >= maxYields {
		return nil
	}
	return c.DeployWaiting
}

// synced reports whether the last sync applied the revision of the last
// kick, without failing as a whole.
func (s *Syncer) synced() bool {
	s.run.Lock() // a sync under way may be applying it
	defer s.run.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last != nil && s.last.Err == "" && s.kicked != "" && s.last.Revision == s.kicked
}

// Last is the last sync's report (dry runs aside), or nil before the first.
func (s *Syncer) Last() *Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// detail is what the sync did, object by object: what every reader's
// view of its history event is rendered from (history.Event.For).
func detail(rep *Report) *history.SyncDetail {
	d := &history.SyncDetail{}
	if rep.Err != "" {
		d.Problems = append(d.Problems, rep.Err)
	}
	d.Problems = append(d.Problems, rep.Problems...)
	for _, r := range rep.Results {
		switch r.Action {
		case platform.ActionCreated, platform.ActionChanged, platform.ActionDeleted, platform.ActionFailed:
		default:
			continue
		}
		o := history.SyncObject{Namespace: r.Ref.Namespace, Kind: r.Ref.Kind, Name: r.Ref.Name, Action: r.Action, Error: r.Error}
		o.File, o.Line = splitWhere(r.Where)
		d.Add(o)
	}
	return d
}

// splitWhere splits "file:line" (platform.Object.Where) into its parts.
func splitWhere(where string) (string, int) {
	i := strings.LastIndexByte(where, ':')
	if i < 0 {
		return where, 0
	}
	line, err := strconv.Atoi(where[i+1:])
	if err != nil || line <= 0 {
		return where, 0
	}
	return where[:i], line
}

// summary is the history message as a reader who sees everything reads
// it: the counts, then each object changed.
func summary(rep *Report) string {
	d := detail(rep)
	msg, _ := d.Render(rep.Revision, d.Objects, true)
	return msg
}

// services are the workloads a sync changed or failed, for the history's
// per-service view.
func services(rep *Report) []string {
	set := map[string]bool{}
	for _, r := range rep.Results {
		if r.Action == platform.ActionUnchanged || r.Action == platform.ActionSkipped {
			continue
		}
		if id, ok := r.Ref.Workload(); ok {
			set[id.String()] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// fluxdGroup is the API group of fluxd's own configuration in git (a
// promotion Pipeline, fluxd.io/v1): fluxd reads it, and no cluster has
// its kinds, so the sync never applies it (nor prunes or inventories it).
const fluxdGroup = "fluxd.io"

// leaveFluxdConfig takes fluxd's own configuration objects out of what
// the sync applies.
func leaveFluxdConfig(objs []platform.Object) []platform.Object {
	kept := objs[:0:0]
	for _, o := range objs {
		if av, _ := o.Manifest["apiVersion"].(string); strings.HasPrefix(av, fluxdGroup+"/") {
			continue
		}
		kept = append(kept, o)
	}
	if len(kept) == len(objs) {
		return objs
	}
	return kept
}
