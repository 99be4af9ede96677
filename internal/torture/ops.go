package torture

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is what an operation does.
type Kind string

// The operations the suite draws from.
const (
	// Release is 'fluxctl release -s S -i REPO:TAG', as a user of its own.
	Release Kind = "release"
	// Cancel cancels one of the last few jobs the suite started.
	Cancel Kind = "cancel"
	// PushTag pushes a new tag of a repository to the registry.
	PushTag Kind = "push-tag"
	// Notify sends the registry's webhook for a repository's newest tag.
	Notify Kind = "notify"
	// LockCLI and UnlockCLI are 'fluxctl lock' and 'fluxctl unlock'.
	LockCLI   Kind = "lock-cli"
	UnlockCLI Kind = "unlock-cli"
	// LockGit and UnlockGit are a person's hand-written commits that set
	// or remove fluxd.io/locked, pushed with the git CLI.
	LockGit   Kind = "lock-git"
	UnlockGit Kind = "unlock-git"
	// Automate and Deautomate are 'fluxctl automate' and 'deautomate'.
	Automate   Kind = "automate"
	Deautomate Kind = "deautomate"
	// Hotfix is a person's direct image edit, pushed with the git CLI.
	Hotfix Kind = "hotfix"
	// RaceHotfix is issue 26's first reproduction: a release of a service
	// while a person pushes a hotfix of it, and a lock, just before
	// fluxd's push reaches the remote.
	RaceHotfix Kind = "race-hotfix"
	// Term and Kill stop a replica with SIGTERM or SIGKILL; it is started
	// again at once, on the same state.
	Term Kind = "sigterm"
	Kill Kind = "sigkill"
	// Stall makes the git remote hang every request for a while.
	Stall Kind = "stall"
	// Refuse makes the remote refuse fluxd's next push (nothing lands).
	Refuse Kind = "refuse-push"
	// LoseReply lets fluxd's next push land but answers it with an
	// error, as a connection lost after the remote took the push does.
	LoseReply Kind = "lose-push-reply"
	// Takeover pushes a new tag of a service's repository, releases it,
	// and SIGKILLs the leader while the job runs (Op.Phase says when);
	// the leader is started again, and the other replica takes the job
	// over. Generate schedules one per format (Scheduled), never by
	// weight.
	Takeover Kind = "takeover"
)

// When a Takeover kills the leader (Op.Phase), For after the job is seen
// there.
const (
	// PhaseRunning: once the job runs, whatever its stage (before its
	// push, mostly).
	PhaseRunning = "running"
	// PhaseApplied: once its commit is pushed, while it applies or
	// follows the rollout: the replica that takes it over finds git
	// holding the new image already.
	PhaseApplied = "applied"
)

// weights say how often each kind is drawn.
var weights = []struct {
	kind Kind
	w    int
}{
	{Release, 20}, {Cancel, 6}, {PushTag, 10}, {Notify, 6},
	{LockCLI, 5}, {UnlockCLI, 5}, {LockGit, 4}, {UnlockGit, 4},
	{Automate, 3}, {Deautomate, 3}, {Hotfix, 8}, {RaceHotfix, 4},
	{Term, 3}, {Kill, 3}, {Stall, 2}, {Refuse, 2}, {LoseReply, 2},
}

// Format is how fluxd reads a service's configuration.
type Format string

const (
	// Plain is a Deployment with fluxd's own annotations.
	Plain Format = ""
	// Kustomize is a Deployment that a kustomization builds, with fluxd's
	// annotations in its resource: fluxd releases it through the
	// kustomization's images: entry. Policy commands refuse it (the
	// annotations go in the base, by hand), so lock-cli, unlock-cli,
	// automate and deautomate do not apply to it.
	Kustomize Format = "kustomize"
	// ImagePolicy is a Flux v2 ImagePolicy, NS:imagepolicy/NAME, in
	// namespace PolicyNamespace, whose $imagepolicy markers set the
	// image of the Deployment of the same name (and a ConfigMap's tag).
	// Its automation is its ImageUpdateAutomation, not an annotation,
	// so automate and deautomate do not apply to it; a lock on the
	// ImagePolicy or on the Deployment holds it.
	ImagePolicy Format = "imagepolicy"
	// ImagePolicyBase is an ImagePolicy whose marker sets the image of a
	// Deployment in a kustomize base that an overlay builds from: it
	// moves the base's own build and the overlay's.
	ImagePolicyBase Format = "imagepolicy-base"
	// ImagePolicyList is an ImagePolicy whose marker sets the image of a
	// Deployment that is an item of a kind: List.
	ImagePolicyList Format = "imagepolicy-list"
	// HelmRelease is a Flux v2 HelmRelease, default:helmrelease/NAME,
	// whose values hold its image as image: {repository, tag}: fluxd's
	// container chart-image. It is locked and automated by its own
	// annotations, as a Deployment is; no Helm controller runs in the
	// run, so fluxd ends its releases "applied, not rolled out".
	HelmRelease Format = "helmrelease"
)

// Policy reports whether f is a Flux v2 ImagePolicy's, of any layout.
func (f Format) Policy() bool {
	return f == ImagePolicy || f == ImagePolicyBase || f == ImagePolicyList
}

// Name is f as the run's statistics print it.
func (f Format) Name() string {
	if f == Plain {
		return "plain"
	}
	return string(f)
}

// PolicyNamespace is the namespace of the run's Flux v2 objects.
const PolicyNamespace = "flux-system"

// Service is a service of the run: its name (a Deployment in namespace
// default, and for an ImagePolicy the policy's name too), the repository
// of its image, and its format.
type Service struct {
	Name, Repo string
	Format     Format
}

// ID is the service's ID as fluxd writes it.
func (s Service) ID() string {
	switch {
	case s.Format.Policy():
		return PolicyNamespace + ":imagepolicy/" + s.Name
	case s.Format == HelmRelease:
		return "default:helmrelease/" + s.Name
	}
	return s.DeploymentID()
}

// DeploymentID is the ID of the Deployment the service runs as (not a
// HelmRelease's: its chart's objects are no part of the run).
func (s Service) DeploymentID() string { return "default:deployment/" + s.Name }

// Takes reports whether an operation of kind k applies to the service.
func (s Service) Takes(k Kind) bool {
	switch {
	case s.Format.Policy():
		return k != Automate && k != Deautomate
	case s.Format == Kustomize:
		return k != Automate && k != Deautomate && k != LockCLI && k != UnlockCLI
	}
	return true
}

// The targets of a person's lock of an ImagePolicy's service (Op.Target).
const (
	TargetPolicy   = "policy"   // the ImagePolicy
	TargetWorkload = "workload" // the Deployment holding its marked image
)

// Op is one operation of a run.
type Op struct {
	Step int
	Kind Kind
	// Service is the service it concerns (release, policy, hotfix).
	Service string
	// Repo and Tag name an image (release, push-tag, notify, hotfix).
	Repo, Tag string
	// Replica is "leader" or "follower": which replica a SIGTERM or
	// SIGKILL stops, or which one a command or webhook is sent to.
	Replica string
	// Target is where a person's lock of an ImagePolicy's service goes
	// (LockGit, RaceHotfix): TargetPolicy or TargetWorkload.
	Target string
	// Phase is when a Takeover kills the leader: PhaseRunning or
	// PhaseApplied.
	Phase string
	// Back is how far back Cancel reaches: 0 is the last job started.
	Back int
	// For is how long a Stall lasts.
	For time.Duration
	// Pause is how long the suite waits after the operation.
	Pause time.Duration
}

// String is the operation as the log prints it, one line.
func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%3d %-15s", o.Step, o.Kind)
	if o.Service != "" {
		fmt.Fprintf(&b, " svc=%s", o.Service)
	}
	if o.Repo != "" {
		fmt.Fprintf(&b, " image=%s:%s", o.Repo, o.Tag)
	}
	if o.Target != "" {
		fmt.Fprintf(&b, " lock=%s", o.Target)
	}
	if o.Phase != "" {
		fmt.Fprintf(&b, " at=%s", o.Phase)
	}
	if o.Kind == Cancel {
		fmt.Fprintf(&b, " back=%d", o.Back)
	}
	if o.For > 0 {
		fmt.Fprintf(&b, " for=%v", o.For)
	}
	fmt.Fprintf(&b, " via=%s pause=%v", o.Replica, o.Pause)
	return b.String()
}

// Log prints ops, a line each.
func Log(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// InitialTag is the tag every repository starts with; new tags count up
// from it (1.0.1, 1.0.2, …), so that semver filters see each as newer.
const InitialTag = "1.0.0"

// Generate draws steps operations over services from seed. It depends on
// nothing but its arguments, so a seed replays the same run. An operation
// drawn for a service it does not apply to (Service.Takes) is drawn again
// among those it applies to.
func Generate(seed int64, steps int, services []Service) []Op {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x746f7274757265))
	total := 0
	for _, w := range weights {
		total += w.w
	}
	tags := map[string][]string{} // repo → tags pushed, oldest first
	for _, s := range services {
		tags[s.Repo] = []string{InitialTag}
	}
	hotfixes := 0
	sched, steps := schedule(r, steps, services)
	replica := func() string {
		if r.IntN(2) == 0 {
			return "leader"
		}
		return "follower"
	}
	var ops []Op
	for step := 1; step <= steps; step++ {
		if op, ok := sched[step]; ok {
			op.Step = step
			if op.Kind == Takeover {
				// A version of its own, newer than any: the release
				// always has something to push.
				ts := tags[op.Repo]
				op.Tag = fmt.Sprintf("1.0.%d", len(ts))
				tags[op.Repo] = append(ts, op.Tag)
				// When the leader is killed: how long after the job is
				// seen running, or applying its pushed commit.
				if r.IntN(2) == 0 {
					op.Phase, op.For = PhaseRunning, time.Duration(r.IntN(1500))*time.Millisecond
				} else {
					op.Phase, op.For = PhaseApplied, time.Duration(r.IntN(300))*time.Millisecond
				}
			}
			op.Pause = time.Duration(r.IntN(2000)) * time.Millisecond
			ops = append(ops, op)
			continue
		}
		n := r.IntN(total)
		var kind Kind
		for _, w := range weights {
			if n < w.w {
				kind = w.kind
				break
			}
			n -= w.w
		}
		svc := services[r.IntN(len(services))]
		if !svc.Takes(kind) {
			var some []Service
			for _, s := range services {
				if s.Takes(kind) {
					some = append(some, s)
				}
			}
			svc = some[r.IntN(len(some))]
		}
		op := Op{Step: step, Kind: kind, Replica: replica(), Pause: time.Duration(r.IntN(2000)) * time.Millisecond}
		switch kind {
		case Release, RaceHotfix:
			ts := tags[svc.Repo]
			// Mostly the newest tag, sometimes an older one (a downgrade).
			tag := ts[len(ts)-1]
			if r.IntN(4) == 0 {
				tag = ts[r.IntN(len(ts))]
			}
			op.Service, op.Repo, op.Tag = svc.Name, svc.Repo, tag
			if kind == RaceHotfix && svc.Format.Policy() {
				op.Target = []string{TargetPolicy, TargetWorkload}[r.IntN(2)]
			}
		case PushTag:
			ts := tags[svc.Repo]
			tag := fmt.Sprintf("1.0.%d", len(ts))
			tags[svc.Repo] = append(ts, tag)
			op.Repo, op.Tag = svc.Repo, tag
		case Notify:
			ts := tags[svc.Repo]
			op.Repo, op.Tag = svc.Repo, ts[len(ts)-1]
		case Hotfix:
			hotfixes++
			op.Service, op.Repo, op.Tag = svc.Name, svc.Repo, fmt.Sprintf("1.0.%d-hotfix.%d", len(tags[svc.Repo])-1, hotfixes)
		case LockCLI, UnlockCLI, LockGit, UnlockGit, Automate, Deautomate:
			op.Service = svc.Name
			if kind == LockGit && svc.Format.Policy() {
				op.Target = []string{TargetPolicy, TargetWorkload}[r.IntN(2)]
			}
		case Cancel:
			op.Back = r.IntN(3)
		case Stall:
			op.For = time.Duration(2+r.IntN(7)) * time.Second
		}
		ops = append(ops, op)
	}
	return ops
}

// Formats are the formats of services, each once, in the order of their
// first service.
func Formats(services []Service) []Format {
	var out []Format
	seen := map[Format]bool{}
	for _, s := range services {
		if !seen[s.Format] {
			seen[s.Format] = true
			out = append(out, s.Format)
		}
	}
	return out
}

// Scheduled is what Generate schedules for each format, whatever the
// draws: a person's unlock of the format's first service (so that a lock
// drawn before does not hold it), then a Takeover of it on the next step.
// Each format so gets a release of a tag of its own that the leader is
// killed in the middle of: a fluxd commit that moves the format, made by
// a replica that took the job over (check (g) counts them).
var Scheduled = []Kind{UnlockGit, Takeover}

// schedule picks, from r, the steps of each format's Scheduled
// operations: the run is cut into as many stretches as there are
// formats, and each format's pair lands at a drawn step of its own
// stretch. A run too short for them all is lengthened to fit; the
// returned steps is the run's length.
func schedule(r *rand.Rand, steps int, services []Service) (map[int]Op, int) {
	fs := Formats(services)
	per := len(Scheduled)
	if steps < len(fs)*per {
		steps = len(fs) * per
	}
	stretch := steps / len(fs)
	out := map[int]Op{}
	for i, f := range fs {
		var svc Service
		for _, s := range services {
			if s.Format == f {
				svc = s
				break
			}
		}
		at := 1 + i*stretch + r.IntN(stretch-per+1)
		for k, kind := range Scheduled {
			op := Op{Kind: kind, Service: svc.Name, Replica: "leader"}
			if kind == Takeover {
				op.Repo = svc.Repo
			}
			out[at+k] = op
		}
	}
	return out, steps
}

// HotfixTag is the tag a RaceHotfix's person pushes.
func (o Op) HotfixTag() string { return fmt.Sprintf("%s-hotfix.race%d", o.Tag, o.Step) }
