package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ElectionConfig configures leader election over a coordination.k8s.io
// Lease, through client-go's leaderelection.
type ElectionConfig struct {
	Namespace, Name string
	// Address is where this replica serves its API; it is part of the
	// identity, so that followers know where to forward mutating calls.
	Address string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's: a
	// new leader takes over at most LeaseDuration after the old one
	// stopped renewing.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Validate checks the timings as client-go requires them.
func (c ElectionConfig) Validate() error {
	var errs []error
	if c.Namespace == "" || c.Name == "" {
		errs = append(errs, errors.New("leader election needs a namespace and a lease name"))
	}
	if c.Address == "" {
		errs = append(errs, errors.New("leader election needs the address other replicas reach this one at (--advertise-address)"))
	}
	if !(c.LeaseDuration > c.RenewDeadline && c.RenewDeadline > c.RetryPeriod && c.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election timings must satisfy lease duration (%v) > renew deadline (%v) > retry period (%v) > 0", c.LeaseDuration, c.RenewDeadline, c.RetryPeriod))
	}
	return errors.Join(errs...)
}

// Leadership tracks who leads, for the API's forwarding.
type Leadership struct {
	self string

	mu     sync.Mutex
	leader string // identity of the current leader, "" while unknown
}

// IsLeader reports whether this replica leads.
func (l *Leadership) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader == l.self
}

// LeaderAddr is the current leader's API address, "" while unknown.
func (l *Leadership) LeaderAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return AddressOf(l.leader)
}

// LeaderWebhookAddr is the current leader's webhook address, "" while
// unknown or when it serves no webhooks.
func (l *Leadership) LeaderWebhookAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if parts := strings.Split(l.leader, "#"); len(parts) > 2 {
		return parts[2]
	}
	return ""
}

// AddressOf returns the API address in a leader identity, which is
// "API_ADDRESS#RANDOM[#WEBHOOK_ADDRESS]".
func AddressOf(identity string) string {
	addr, _, _ := strings.Cut(identity, "#")
	return addr
}

// Elect campaigns for the lease until ctx ends. While this replica leads,
// lead runs with a context that ends when leadership does. Elect returns
// an error if leadership is lost while ctx is still live: the caller
// should exit, so that a replica that may have missed renewals never
// keeps acting as leader.
func (c *Cluster) Elect(ctx context.Context, cfg ElectionConfig, l *Leadership, lead func(context.Context), log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name, c.client.CoreV1(), c.client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: l.self})
	if err != nil {
		return err
	}
	log = log.With("component", "leader", "lease", cfg.Namespace+"/"+cfg.Name, "identity", l.self)
	var lost error
	// client-go runs OnStartedLeading in a goroutine of its own and, with
	// ReleaseOnCancel, gives the lease up as soon as leadership ends,
	// without waiting for it: another replica could then take the jobs
	// over while this one still winds them down. So the lease is released
	// here, once lead has returned.
	led := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: false,
		Name:            "fluxd",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(led)
				log.Info("leading: running the automator and the release jobs")
				lead(ctx)
			},
			OnStoppedLeading: func() {
				l.mu.Lock()
				l.leader = ""
				l.mu.Unlock()
				if ctx.Err() == nil {
					lost = errors.New("lost the leader lease (could not renew it in time); exiting so that only one replica acts as leader")
					log.Error(lost.Error())
				}
			},
			OnNewLeader: func(identity string) {
				l.mu.Lock()
				l.leader = identity
				l.mu.Unlock()
				if identity != l.self {
					log.Info("following", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if le.IsLeader() {
		// It acquired the lease, so lead runs (or ran): wait for it.
		select {
		case <-led:
		case <-time.After(time.Minute):
			log.Error("the leader's work did not stop within a minute; giving the lease up anyway")
		}
		release(lock, l.self, log)
	}
	return lost
}

// release gives the lease up, if this replica still holds it, so that
// another takes over at once instead of after the lease expires.
func release(lock resourcelock.Interface, self string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec.HolderIdentity != self {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}); err != nil {
		log.Warn("could not give the lease up; another replica takes over when it expires", "error", err)
		return
	}
	log.Info("gave the lease up after the jobs stopped")
}

// NewLeadership returns the leadership state of a replica serving its API
// at addr and, when not empty, webhooks at webhookAddr. Without election,
// call SetLeader so that it always leads.
func NewLeadership(addr, suffix, webhookAddr string) *Leadership {
	self := addr + "#" + suffix
	if webhookAddr != "" {
		self += "#" + webhookAddr
	}
	return &Leadership{self: self}
}

// SetLeader makes this replica the leader (no election).
func (l *Leadership) SetLeader() {
	l.mu.Lock()
	l.leader = l.self
	l.mu.Unlock()
}
