package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// AnnotationAutomatedBy names the instance that automated a workload; its
// automated releases are recorded in that instance's history.
const AnnotationAutomatedBy = policy.AutomatedBy

// PolicyChange is a change of a workload's policy annotations in git.
type PolicyChange struct {
	Service platform.ID
	// Set are the annotations to write.
	Set map[string]string
	// Type is the history event to record: Automate, Deautomate, Lock or
	// Unlock.
	Type          history.Type
	User, Message string
}

// SetPolicy writes a workload's policy annotations in git, in one commit,
// and records it. When the annotations already hold the values, nothing
// is committed and "" is returned.
func (e *Engine) SetPolicy(ctx context.Context, instance string, ch PolicyChange) (string, error) {
	if err := checkMessage(ch.Message); err != nil {
		return "", fluxerr.New(fluxerr.User, err, "")
	}
	if err := e.lockGit(ctx); err != nil {
		return "", err
	}
	defer e.unlockGit()
	start := time.Now()
	rev, m, err := e.manifests(ctx)
	if err != nil {
		return "", err
	}
	def, ok := m.Workloads[ch.Service]
	if !ok {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("%s has no definition in git, so its policy cannot be stored", ch.Service),
			"fluxd keeps policies as annotations on the workload in git; add the workload's manifest to the repository first.")
	}
	same := true
	for k, v := range ch.Set {
		if def.Annotations[k] != v {
			same = false
		}
	}
	if same {
		return "", nil
	}
	// The annotations are written on the object in its own file: a
	// workload's definition, or, for a Flux v2 ImagePolicy that a
	// kustomization builds, the ImagePolicy's file in that
	// kustomization's directory (Flux v2's usual layout).
	file, written, err := format.Of(def).Annotated(e.repo.Dir(), def)
	if err != nil {
		return "", err
	}
	// The change is written in the dialect the workload uses (fluxcd.io/
	// stays fluxcd.io/): what is written is raw. What the render check
	// compares is the object as built, def.RawAnnotations.
	raw := policy.Write(written, ch.Set)
	same = true
	for k, v := range raw {
		if written[k] != v {
			same = false
		}
	}
	if same {
		return "", nil
	}
	content, err := gitrepo.ReadFile(e.repo.Dir(), file)
	if err != nil {
		return "", err
	}
	out, err := gitrepo.SetAnnotations(content, ch.Service, raw)
	if err != nil {
		return "", fluxerr.New(fluxerr.User, err, "")
	}
	user := ch.User
	if user == "" {
		user = "unknown"
	}
	var keys []string
	for k, v := range raw {
		keys = append(keys, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(keys)
	msg := fmt.Sprintf("%s %s for %s by %s\n\n%s\n", titleOf(ch.Type), ch.Service, instance, user, strings.Join(keys, "\n"))
	if ch.Message != "" {
		msg += "\n" + ch.Message + "\n"
	}
	// A trailer of its own lets a push whose outcome is unclear be found.
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	trailerID := "policy-" + hex.EncodeToString(nonce[:])
	msg += "\n" + JobTrailer(trailerID) + "\n"
	var changes []gitrepo.Change
	for k, v := range raw {
		changes = append(changes, gitrepo.Change{Workload: ch.Service, Annotation: k, From: def.RawAnnotations[k], To: v})
	}
	commit, err := e.commitChecked(ctx, rev, map[string][]byte{file: out}, changes, msg, authorOf(ch.User))
	if err == nil {
		err = e.repo.Push(ctx, commit)
		if err != nil && !errors.Is(err, gitrepo.ErrMoved) && !stopping(ctx) {
			// A timeout may strike after the remote took the push: look
			// before recording a failure.
			if _, landed, lerr := e.pushLanded(ctx, commit, trailerID); lerr == nil && landed {
				e.log.Warn("the policy push reported an error, but the remote has the commit", "commit", commit, "error", err)
				err = nil
			}
		}
	}
	if err != nil {
		commit = ""
	}
	ev := history.Event{Instance: instance, Type: ch.Type, Services: []string{ch.Service.String()}, User: ch.User, Message: ch.Message, StartedAt: start, EndedAt: time.Now(), Commit: commit}
	if err != nil {
		ev.Type, ev.Error = history.Failed, fmt.Sprintf("%s: %v", ch.Type, err)
	}
	if _, rerr := e.recorder.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		e.log.Error("recording a policy change in history failed", "error", rerr)
	}
	if err != nil {
		return "", err
	}
	e.log.Info("policy pushed", "service", ch.Service.String(), "change", string(ch.Type), "commit", commit)
	return commit, nil
}

func titleOf(t history.Type) string {
	s := string(t)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// authorOf is the commit author for the user a caller named: a plain name,
// or git's "Name <email>" form split into its parts. A user that is
// neither is passed on whole, and the repository's commit refuses it.
func authorOf(user string) gitrepo.Signature {
	if s, err := gitrepo.ParseUser(user); err == nil {
		return s
	}
	return gitrepo.Signature{Name: user}
}
