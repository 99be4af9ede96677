package notify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/history"
)

// Kind is a receiver's type.
type Kind string

// The kinds of receiver.
const (
	Webhook Kind = "webhook"
	Slack   Kind = "slack"
	Teams   Kind = "teams"
	Discord Kind = "discord"
	GitHub  Kind = "github"
	GitLab  Kind = "gitlab"
	Gitea   Kind = "gitea"
)

// Kinds lists every kind of receiver.
var Kinds = []Kind{Webhook, Slack, Teams, Discord, GitHub, GitLab, Gitea}

// forge says whether k sets commit statuses (rather than posting
// messages).
func (k Kind) forge() bool { return k == GitHub || k == GitLab || k == Gitea }

// Category is what a receiver's events filter names.
type Category string

// The categories of event. An event may be in two: a failed automated
// release is in automation and failure.
const (
	CatRelease    Category = "release"
	CatAutomation Category = "automation"
	CatSync       Category = "sync"
	CatLock       Category = "lock"
	CatFailure    Category = "failure"
	// CatPromotion: a pipeline's bundle promoted, verified, failed,
	// awaiting approval, approved, paused or resumed.
	CatPromotion Category = "promotion"
)

// Categories lists every category.
var Categories = []Category{CatRelease, CatAutomation, CatSync, CatLock, CatFailure, CatPromotion}

// Config is the notification config file: its receivers.
type Config struct {
	Receivers []Receiver
}

// Receiver is one place notices go.
type Receiver struct {
	// Name names the receiver in metrics and logs, and keys its cursor
	// in the store: renaming a receiver starts it afresh.
	Name string
	Kind Kind
	// URL is where messages are posted (webhook, slack, teams, discord),
	// or the forge's API base (https://api.github.com,
	// https://gitlab.example/api/v4, https://gitea.example/api/v1). It is
	// never logged: a chat webhook's URL is its secret.
	URL string
	// Secret is the HMAC key (webhook) or the token (forges), read from
	// the file secretFile names; for slack, teams and discord a
	// secretFile holds the URL instead of url.
	Secret string
	// Repository is owner/name (GitLab: the project's path) for forges.
	Repository string
	// Events are the categories sent; empty is all.
	Events []Category
	// Services are globs of service IDs (* any text, ? one character);
	// empty is all. An event is sent when one of its services matches.
	// A sync event is sent, rendered from the objects one matches, when
	// one of its objects matches (see view).
	Services []string
	// Timeout bounds each request (default 10s).
	Timeout time.Duration

	services []*regexp.Regexp
	// line is where the receiver starts in the file.
	line int
}

// rawConfig is the file as written.
type rawConfig struct {
	Receivers []rawReceiver `yaml:"receivers"`
}

type rawReceiver struct {
	Name       string   `yaml:"name"`
	Type       string   `yaml:"type"`
	URL        string   `yaml:"url"`
	SecretFile string   `yaml:"secretFile"`
	Repository string   `yaml:"repository"`
	Events     []string `yaml:"events"`
	Services   []string `yaml:"services"`
	Timeout    string   `yaml:"timeout"`
}

// DefaultTimeout bounds a delivery request.
const DefaultTimeout = 10 * time.Second

// Load reads and checks the config file at path, and the secret files it
// names. Every problem is reported at once, each with its line.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the notification config: %w", err)
	}
	cfg, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("the notification config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse reads and checks a config file's contents, reading the secret
// files it names.
func Parse(b []byte) (*Config, error) {
	var raw rawConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it is empty: it must hold receivers: [...] (see docs/notifications.md)")
		}
		return nil, fmt.Errorf("%s (the file must be YAML: receivers: a list of {name, type, url, secretFile, repository, events, services}; see docs/notifications.md)", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	lines := receiverLines(b)
	cfg := &Config{}
	var errs []error
	seen := map[string]int{}
	for i, rr := range raw.Receivers {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		r, rerrs := rr.check(line)
		if prev, ok := seen[r.Name]; ok && r.Name != "" {
			rerrs = append(rerrs, fmt.Errorf("line %d: receiver %q: the name is used already at line %d (names key each receiver's progress)", line, r.Name, prev))
		}
		seen[r.Name] = line
		errs = append(errs, rerrs...)
		cfg.Receivers = append(cfg.Receivers, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// receiverLines are the lines where each receiver starts.
func receiverLines(b []byte) []int {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "receivers" {
			var out []int
			for _, n := range root.Content[i+1].Content {
				out = append(out, n.Line)
			}
			return out
		}
	}
	return nil
}

// check turns the receiver as written into a Receiver, reading its
// secret file; each problem names the line.
func (rr rawReceiver) check(line int) (Receiver, []error) {
	r := Receiver{Name: rr.Name, Kind: Kind(rr.Type), URL: strings.TrimSpace(rr.URL), Repository: rr.Repository, Services: rr.Services, Timeout: DefaultTimeout, line: line}
	var errs []error
	bad := func(format string, args ...any) {
		who := "a receiver"
		if rr.Name != "" {
			who = fmt.Sprintf("receiver %q", rr.Name)
		}
		errs = append(errs, fmt.Errorf("line %d: %s: %s", line, who, fmt.Sprintf(format, args...)))
	}
	if rr.Name == "" {
		bad("name is missing (each receiver needs a name, unique in the file)")
	} else if !validName.MatchString(rr.Name) {
		bad("the name may hold only letters, digits, '-', '_' and '.' (it labels metrics)")
	}
	known := false
	for _, k := range Kinds {
		known = known || k == r.Kind
	}
	if !known {
		bad("type %q is not one of webhook, slack, teams, discord, github, gitlab, gitea", rr.Type)
	}
	if rr.SecretFile != "" {
		s, err := os.ReadFile(rr.SecretFile)
		switch {
		case err != nil:
			bad("secretFile: %v", err)
		case strings.TrimSpace(string(s)) == "":
			bad("secretFile %s is empty", rr.SecretFile)
		default:
			r.Secret = strings.TrimSpace(string(s))
		}
	}
	switch {
	case r.Kind == Slack || r.Kind == Teams || r.Kind == Discord:
		// The URL is the secret: it may come from secretFile instead.
		if r.URL == "" && r.Secret != "" {
			r.URL, r.Secret = r.Secret, ""
		}
	case r.Kind == Webhook && rr.SecretFile == "":
		bad("secretFile is missing: a webhook's body is signed with the key it holds (X-Fluxd-Signature-256)")
	case r.Kind.forge() && rr.SecretFile == "":
		bad("secretFile is missing: it holds the API token that sets commit statuses")
	}
	if r.URL == "" {
		bad("url is missing")
	} else if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is not quoted: a chat webhook's URL is its secret.
		bad("url is not an http:// or https:// URL")
	}
	if r.Kind.forge() && !strings.Contains(strings.Trim(rr.Repository, "/"), "/") {
		bad("repository %q is not owner/name", rr.Repository)
	}
	for _, e := range rr.Events {
		ok := false
		for _, c := range Categories {
			ok = ok || string(c) == e
		}
		if !ok {
			bad("events: %q is not one of release, automation, sync, lock, failure", e)
		}
		r.Events = append(r.Events, Category(e))
	}
	for _, g := range rr.Services {
		re, err := globRegexp(g)
		if err != nil {
			bad("services: %q: %v", g, err)
			continue
		}
		r.services = append(r.services, re)
	}
	if rr.Timeout != "" {
		d, err := time.ParseDuration(rr.Timeout)
		if err != nil || d <= 0 {
			bad("timeout %q is not a positive duration like 10s", rr.Timeout)
		} else {
			r.Timeout = d
		}
	}
	return r, errs
}

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// globRegexp is g as a regexp: * is any text (slashes too: a service ID
// is namespace:kind/name), ? one character.
func globRegexp(g string) (*regexp.Regexp, error) {
	if g == "" {
		return nil, errors.New("an empty glob matches nothing")
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range g {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// view is what a receiver filtered by services sees of the history: the
// services and the sync's objects whose ID ("namespace:kind/name") one
// of its globs matches; nil (everything) for a receiver without
// services. Every event it is sent is history.Event.For this view, so a
// sync's message and error name none of the objects it does not match,
// and no cluster-scoped object.
func (r *Receiver) view() *history.View {
	if len(r.services) == 0 {
		return nil
	}
	match := func(id string) bool {
		for _, re := range r.services {
			if re.MatchString(id) {
				return true
			}
		}
		return false
	}
	return &history.View{Service: match, Object: func(o history.SyncObject) bool { return match(o.ID()) }}
}

// wants says whether the receiver takes the message, made of an event
// as its view shows it.
func (r *Receiver) wants(m *Message) bool {
	if len(r.Events) > 0 {
		ok := false
		for _, c := range r.Events {
			for _, mc := range m.Categories {
				ok = ok || c == mc
			}
		}
		if !ok {
			return false
		}
	}
	// Its services were judged by view.
	if r.Kind.forge() {
		return m.Commit != "" && m.forgeState() != ""
	}
	return true
}

// same says whether two receivers are configured alike (a worker that
// delivers to one may go on delivering to the other).
func (r Receiver) same(o Receiver) bool {
	return r.Name == o.Name && r.Kind == o.Kind && r.URL == o.URL && r.Secret == o.Secret && r.Repository == o.Repository &&
		fmt.Sprint(r.Events) == fmt.Sprint(o.Events) && fmt.Sprint(r.Services) == fmt.Sprint(o.Services) && r.Timeout == o.Timeout
}
