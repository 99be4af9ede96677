package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// A plan's checksum covers its items (each targeted service's action,
// reason, and current and target images), and, for each workload it
// changes, the images it runs in the cluster and its whole manifest in git
// (decoded: comments and formatting aside), so that what executes is what
// was confirmed. It does not cover the git revision, nor the running
// images of services it leaves alone: a commit that changes none of the
// workloads it changes (another job's release or rollback, an automated
// release, an unrelated push) or a rollout of another service leaves a
// confirmed plan valid, so a queue of confirmed releases behind a slow
// rollout still runs, and so does a confirmed release --all.

// checksum computes the plan's checksum; running maps each changed
// service to its containers' images in the cluster ("name=image" lines),
// manifests each to its manifest's digest.
func checksum(p *Plan, running map[string][]string, manifests map[string]string) string {
	h := sha256.New()
	if p.Promotion != nil {
		// Which bundle, into which stage: a confirmed promotion of one
		// bundle never executes another with the same updates.
		fmt.Fprint(h, promotionSum(p.Promotion))
	}
	for _, it := range p.Items {
		fmt.Fprintf(h, "item %s %s %q\n", it.Service, it.Action, it.Reason)
		for _, u := range it.Updates {
			fmt.Fprintf(h, "  update %s %s %s\n", u.Container, u.Current, u.Target)
		}
		if it.Action != Update {
			continue
		}
		imgs := append([]string(nil), running[it.Service.String()]...)
		sort.Strings(imgs)
		fmt.Fprintf(h, "  running %s\n", strings.Join(imgs, " "))
		fmt.Fprintf(h, "  manifest %s\n", manifests[it.Service.String()])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// planMemory remembers recent plans by checksum, to say what changed when
// a confirmed checksum no longer matches.
type planMemory struct {
	mu    sync.Mutex
	order []string
	plans map[string]planSnapshot
}

type planSnapshot struct {
	plan      Plan
	running   map[string][]string
	manifests map[string]string
}

const rememberedPlans = 64

func (m *planMemory) add(p *Plan, running map[string][]string, manifests map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = map[string]planSnapshot{}
	}
	if _, ok := m.plans[p.Checksum]; ok {
		return
	}
	m.plans[p.Checksum] = planSnapshot{*p, running, manifests}
	m.order = append(m.order, p.Checksum)
	if len(m.order) > rememberedPlans {
		delete(m.plans, m.order[0])
		m.order = m.order[1:]
	}
}

func (m *planMemory) get(sum string) (planSnapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.plans[sum]
	return s, ok
}

// WhatChanged explains how the plan now differs from the one whose
// checksum was confirmed, if this engine made that plan recently.
func (e *Engine) WhatChanged(confirmed string, now *Plan) string {
	old, ok := e.memory.get(confirmed)
	if !ok {
		return fmt.Sprintf("checksum %s was not made by this fluxd recently (now %s)", confirmed, now.Checksum)
	}
	var diffs []string
	if d := promotionChanged(old.plan.Promotion, now.Promotion); d != "" {
		diffs = append(diffs, d)
	}
	nowItems := map[string]Item{}
	for _, it := range now.Items {
		nowItems[it.Service.String()] = it
	}
	for _, it := range old.plan.Items {
		id := it.Service.String()
		n, ok := nowItems[id]
		switch {
		case !ok:
			diffs = append(diffs, id+" is no longer part of the release")
		case fmt.Sprint(n.Updates) != fmt.Sprint(it.Updates) || n.Action != it.Action:
			diffs = append(diffs, fmt.Sprintf("%s would now %s (%s) instead of %s", id, n.Action, describeItem(n), describeItem(it)))
		}
		delete(nowItems, id)
	}
	for id := range nowItems {
		diffs = append(diffs, id+" is newly part of the release")
	}
	cur, _ := e.memory.get(now.Checksum)
	for id, imgs := range old.running {
		if now, ok := cur.running[id]; ok && fmt.Sprint(imgs) != fmt.Sprint(now) {
			diffs = append(diffs, fmt.Sprintf("%s now runs %v in the cluster (was %v)", id, now, imgs))
		}
	}
	for id, d := range old.manifests {
		if now, ok := cur.manifests[id]; ok && d != now {
			diffs = append(diffs, id+"'s manifest changed in git")
		}
	}
	if len(diffs) == 0 {
		return "the plan changed"
	}
	if old.plan.Revision != now.Revision {
		diffs = append(diffs, fmt.Sprintf("(git moved from %.12s to %.12s)", old.plan.Revision, now.Revision))
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

func describeItem(it Item) string {
	if len(it.Updates) == 0 {
		return it.Reason
	}
	var u []string
	for _, c := range it.Updates {
		u = append(u, c.Container+" -> "+c.Target)
	}
	return strings.Join(u, ", ")
}
