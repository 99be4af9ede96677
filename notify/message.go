package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fluxd/fluxd/history"
)

// Message is what a notice tells, the same for every receiver: the
// webhook's JSON body, and what the chat and forge formats are made of.
type Message struct {
	// ID is the notice's ID, sent as X-Fluxd-Event-Id: the same for
	// every delivery of one notice, to every receiver.
	ID string `json:"id"`
	// Kind is what happened: release.started, release.succeeded,
	// release.failed, release.rolled-back, release.cancelled (and the
	// same with automated-release.), sync.changed, sync.failed, lock,
	// unlock, lock.failed, unlock.failed, automation.unverified-skipped
	// (the automator skipped a newer image that does not pass signature
	// verification; once per service and image digest).
	Kind string `json:"kind"`
	// Categories are the filter categories the event is in.
	Categories []Category `json:"categories"`
	// Instance is the tenant whose action it was (_sync for a sync).
	Instance string           `json:"instance"`
	Services []string         `json:"services"`
	Changes  []history.Change `json:"changes"`
	Commit   string           `json:"commit,omitempty"`
	User     string           `json:"user,omitempty"`
	Job      string           `json:"job,omitempty"`
	Message  string           `json:"message,omitempty"`
	Error    string           `json:"error,omitempty"`
	// URL is the status page's view of the job (or the history), when
	// fluxd knows where its page is (--web-url).
	URL  string    `json:"url,omitempty"`
	Time time.Time `json:"time"`
}

// automatorUser is the user the automator releases as (automator.User;
// not imported, so that notify stays beside the packages it reports on).
const automatorUser = "automator"

// newMessage turns a notice into a Message; false for a notice no
// receiver is told of (automate, deautomate, other policy changes).
func newMessage(n history.Notice, webURL string) (*Message, bool) {
	ev := n.Event
	m := &Message{ID: strconv.FormatInt(n.ID, 10), Instance: ev.Instance, Services: ev.Services, Changes: ev.Changes,
		Commit: ev.Commit, User: ev.User, Job: ev.Job, Message: ev.Message, Error: ev.Error, Time: ev.EndedAt}
	if m.Time.IsZero() {
		m.Time = n.CreatedAt
	}
	if m.Services == nil {
		m.Services = []string{}
	}
	if m.Changes == nil {
		m.Changes = []history.Change{}
	}
	release := func(automated bool, what string, failure bool) {
		if automated || ev.User == automatorUser {
			m.Kind, m.Categories = "automated-release."+what, []Category{CatAutomation}
		} else {
			m.Kind, m.Categories = "release."+what, []Category{CatRelease}
		}
		if failure {
			m.Categories = append(m.Categories, CatFailure)
		}
	}
	switch ev.Type {
	case history.Release, history.AutomatedRelease:
		what := "succeeded"
		if n.Started {
			what = "started"
		}
		release(ev.Type == history.AutomatedRelease, what, false)
	case history.Rollback:
		release(false, "rolled-back", true)
	case history.Cancelled:
		release(false, "cancelled", false)
	case history.Failed:
		// A policy change that failed says so first ("lock: ...").
		for _, p := range []history.Type{history.Lock, history.Unlock} {
			if strings.HasPrefix(ev.Error, string(p)+": ") {
				m.Kind, m.Categories = string(p)+".failed", []Category{CatLock, CatFailure}
			}
		}
		if m.Kind == "" {
			if strings.HasPrefix(ev.Error, string(history.Automate)+": ") || strings.HasPrefix(ev.Error, string(history.Deautomate)+": ") || strings.HasPrefix(ev.Error, string(history.Policy)+": ") {
				return nil, false
			}
			release(false, "failed", true)
		}
	case history.Sync:
		if ev.Error != "" {
			m.Kind, m.Categories = "sync.failed", []Category{CatSync, CatFailure}
		} else {
			m.Kind, m.Categories = "sync.changed", []Category{CatSync}
		}
	case history.Lock, history.Unlock:
		m.Kind, m.Categories = string(ev.Type), []Category{CatLock}
	case history.Promoted, history.Verified, history.AwaitingApproval, history.Approved, history.PromotionPaused, history.PromotionResumed:
		m.Kind, m.Categories = "promotion."+string(ev.Type), []Category{CatPromotion}
	case history.PromotionFailed:
		m.Kind, m.Categories = "promotion.failed", []Category{CatPromotion, CatFailure}
	case history.UnverifiedSkipped:
		m.Kind, m.Categories = "automation.unverified-skipped", []Category{CatAutomation}
	default:
		return nil, false
	}
	if webURL != "" {
		base := strings.TrimRight(webURL, "/")
		if m.Job != "" {
			m.URL = base + "/#/job/" + m.Job
		} else {
			m.URL = base + "/#/history"
		}
	}
	return m, true
}

// forgeState is the commit status a forge is given, in GitHub's words
// (pending, success, failure); "" for a message that sets none.
func (m *Message) forgeState() string {
	switch m.Kind {
	case "release.started", "automated-release.started":
		return "pending"
	case "release.succeeded", "automated-release.succeeded":
		return "success"
	case "release.failed", "automated-release.failed", "release.cancelled", "automated-release.cancelled":
		return "failure"
	}
	return ""
}

// Title is one line saying what happened, for chat messages.
func (m *Message) Title() string {
	who := m.User
	if who == "" {
		who = "fluxd"
	}
	what := m.Kind
	switch m.Kind {
	case "release.started", "automated-release.started":
		what = "release started rolling out"
	case "release.succeeded", "automated-release.succeeded":
		what = "release succeeded"
	case "release.failed", "automated-release.failed":
		what = "release FAILED"
	case "release.rolled-back", "automated-release.rolled-back":
		what = "release ROLLED BACK"
	case "release.cancelled", "automated-release.cancelled":
		what = "release cancelled"
	case "sync.changed":
		what = "sync applied changes"
	case "sync.failed":
		what = "sync FAILED"
	case "lock":
		what = "locked"
	case "unlock":
		what = "unlocked"
	case "lock.failed", "unlock.failed":
		what = strings.TrimSuffix(m.Kind, ".failed") + " FAILED"
	case "automation.unverified-skipped":
		what = "automation skipped an image that does not pass signature verification"
	}
	if strings.HasPrefix(m.Kind, "automated-") {
		what = "automated " + what
	}
	svcs := strings.Join(m.Services, ", ")
	if len(m.Services) > 3 {
		svcs = fmt.Sprintf("%s and %d more", strings.Join(m.Services[:3], ", "), len(m.Services)-3)
	}
	s := fmt.Sprintf("[%s] %s: %s", m.Instance, what, svcs)
	if svcs == "" {
		s = fmt.Sprintf("[%s] %s", m.Instance, what)
	}
	return s + " (by " + who + ")"
}

// Lines are the details, one per line: each image change, the commit,
// the job, the message and the error.
func (m *Message) Lines() []string {
	var out []string
	for i, c := range m.Changes {
		if i == 10 {
			out = append(out, fmt.Sprintf("… and %d more image changes", len(m.Changes)-10))
			break
		}
		out = append(out, fmt.Sprintf("%s %s: %s → %s", c.Service, c.Container, c.From, c.To))
	}
	if m.Commit != "" {
		out = append(out, "commit "+short(m.Commit))
	}
	if m.Job != "" {
		out = append(out, "job "+m.Job)
	}
	if m.Message != "" {
		out = append(out, m.Message)
	}
	if m.Error != "" {
		out = append(out, "error: "+m.Error)
	}
	return out
}

// failed says whether the message tells of a failure (red in chat).
func (m *Message) failed() bool {
	for _, c := range m.Categories {
		if c == CatFailure {
			return true
		}
	}
	return false
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
