package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is a verification config, as --verify-config holds it:
//
//	profiles:
//	- name: signed
//	  keys: [/etc/fluxd/cosign.pub]          # cosign public keys (PEM)
//	  keySecrets: [fluxd/cosign-keys]        # Secrets (NAMESPACE/NAME) of *.pub keys
//	- name: ci
//	  keyless:
//	  - issuer: https://token.actions.githubusercontent.com
//	    subjectRegexp: ^https://github.com/org/.*$
//	  trustedRoot: /etc/fluxd/trusted_root.json
//	  tlog: required                         # or ignore (default required)
//	  attestations: [https://spdx.dev/Document]
//	repositories:
//	- match: ghcr.io/org/*
//	  profile: signed
type Config struct {
	// Profiles by name, in the order written.
	Profiles []Profile
	// Repositories map repositories, by glob, to the profile each needs.
	Repositories []Rule
}

// Profile names the signers one of whom must have signed an image, and
// the attestations it must carry.
type Profile struct {
	Name string
	// Keys are files of cosign public keys (PEM), as written: a relative
	// path is the config file's directory's.
	Keys []string
	// KeySecrets are Kubernetes Secrets each of whose data keys ending
	// in .pub holds a cosign public key (PEM), as Flux v2's
	// verify.secretRef reads them.
	KeySecrets []SecretRef
	// Keyless are the OIDC identities whose short-lived certificates,
	// issued under TrustedRoot, may sign.
	Keyless []Identity
	// TrustedRoot is the file of the Sigstore trusted root (the CAs and
	// logs) that keyless certificates must chain to.
	TrustedRoot string
	// TrustedRootJSON is the trusted root's content as Load read it
	// (nil from Parse): what the profile verifies by, and fingerprints.
	TrustedRootJSON []byte
	// Tlog says whether a keyless signature needs a transparency-log
	// entry (the Rekor bundle cosign stores beside it): TlogRequired
	// (the default) or TlogIgnore.
	Tlog TlogMode
	// Attestations are predicate types (https://spdx.dev/Document,
	// https://slsa.dev/provenance/v1) of which the image must carry a
	// signed attestation each, signed like the image.
	Attestations []string
	// Line is where the profile starts in the config.
	Line int
}

// SecretRef names a Kubernetes Secret, written NAMESPACE/NAME.
type SecretRef struct {
	Namespace, Name string
}

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// namespaceName is a DNS-1123 label (a namespace); secretName a DNS-1123
// subdomain (a Secret's name).
var (
	namespaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	secretName    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
)

// Identity is a keyless signer: the OIDC issuer that vouched for it and
// the subject of its certificate (an e-mail, a workflow's URL), each
// exact or by regular expression, as cosign's --certificate-oidc-issuer
// (-regexp) and --certificate-identity(-regexp) and Flux v2's
// matchOIDCIdentity name them.
type Identity struct {
	Issuer, Subject string
	// IssuerRegexp and SubjectRegexp are anchored (^...$) expressions;
	// each replaces its exact field. verify/cosign matches each against
	// the whole value (^(?:...)$), alternations' branches too.
	IssuerRegexp, SubjectRegexp *regexp.Regexp
	Line                        int
}

// TlogMode is a profile's tlog: setting.
type TlogMode string

// The tlog: settings.
const (
	// TlogRequired: a keyless signature needs a Rekor entry (cosign's
	// bundle annotation) whose signed entry timestamp a log of the trusted
	// root signed, checked offline; the certificate must have been valid
	// at the entry's time.
	TlogRequired TlogMode = "required"
	// TlogIgnore: the log is not read (cosign's --insecure-ignore-tlog);
	// the certificate must be valid now, so short-lived certificates
	// verify only for their few minutes.
	TlogIgnore TlogMode = "ignore"
)

// Rule maps repositories to a profile.
type Rule struct {
	// Match is a path.Match glob over a repository as images name it
	// (ghcr.io/org/*, docker.io/library/nginx).
	Match   string
	Profile string
	Line    int
}

// Problem is one thing wrong with a config, at its line.
type Problem struct {
	Line int
	What string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.What
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.What)
}

// ConfigError is every problem of a config that was refused.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("verification config refused")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// MaxConfigSize bounds a config: one bigger is refused unread.
const MaxConfigSize = 1 << 20

var profileName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Parse reads a config and checks it, returning every problem with its
// line in a *ConfigError. It reads no file the config names.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{[]Problem{{0, fmt.Sprintf("the config is %d bytes, more than %d: is it the right file?", len(data), MaxConfigSize)}}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, nil
		}
		return nil, &ConfigError{[]Problem{{0, "not YAML: " + err.Error()}}}
	}
	p := &parser{}
	c := p.config(&doc)
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		// A second document would be ignored: say so rather than verify
		// by half a file.
		p.add(&more, "a second YAML document (after ---): the config is one document")
	}
	if len(p.problems) > 0 {
		return nil, &ConfigError{p.problems}
	}
	return c, nil
}

type parser struct {
	problems []Problem
}

func (p *parser) add(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.problems = append(p.problems, Problem{line, fmt.Sprintf(format, args...)})
}

func (p *parser) config(doc *yaml.Node) *Config {
	c := &Config{}
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return c
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return c
	}
	p.fields(root, "the config", func(key string, k, v *yaml.Node) bool {
		switch key {
		case "profiles":
			for _, n := range p.list(v, "profiles") {
				c.Profiles = append(c.Profiles, p.profile(n))
			}
		case "repositories":
			for _, n := range p.list(v, "repositories") {
				c.Repositories = append(c.Repositories, p.rule(n))
			}
		default:
			return false
		}
		return true
	}, "profiles", "repositories")

	seen := map[string]int{}
	for _, pr := range c.Profiles {
		if pr.Name == "" {
			continue
		}
		if at, ok := seen[pr.Name]; ok {
			p.problems = append(p.problems, Problem{pr.Line, fmt.Sprintf("profile %q is defined twice (first at line %d)", pr.Name, at)})
			continue
		}
		seen[pr.Name] = pr.Line
	}
	for _, r := range c.Repositories {
		if _, ok := seen[r.Profile]; r.Profile != "" && !ok {
			p.problems = append(p.problems, Problem{r.Line, fmt.Sprintf("repositories %q: no profile is named %q (profiles: %s)", r.Match, r.Profile, names(c.Profiles))})
		}
	}
	return c
}

func (p *parser) profile(n *yaml.Node) Profile {
	pr := Profile{Line: n.Line}
	if !p.fields(n, "a profile", func(key string, k, v *yaml.Node) bool {
		switch key {
		case "name":
			pr.Name = p.str(v, "name")
		case "keys":
			pr.Keys = p.strs(v, "keys")
		case "keySecrets":
			pr.KeySecrets = p.secretRefs(v)
		case "keyless":
			for _, m := range p.list(v, "keyless") {
				pr.Keyless = append(pr.Keyless, p.identity(m))
			}
		case "trustedRoot":
			pr.TrustedRoot = p.str(v, "trustedRoot")
		case "attestations":
			pr.Attestations = p.strs(v, "attestations")
		case "tlog":
			switch s := TlogMode(p.str(v, "tlog")); s {
			case TlogRequired, TlogIgnore:
				pr.Tlog = s
			case "":
			default:
				p.add(v, "tlog %q: write required (a keyless signature needs its transparency-log entry, the default) or ignore (the log is not read; the certificate must be valid now)", s)
			}
		default:
			return false
		}
		return true
	}, "name", "keys", "keySecrets", "keyless", "trustedRoot", "tlog", "attestations") {
		return pr
	}

	switch {
	case pr.Name == "":
		p.add(n, "a profile has no name")
	case !profileName.MatchString(pr.Name):
		p.add(n, "profile name %q: use lower-case letters, digits and dashes (it is written in annotations: fluxd.io/verify: NAME)", pr.Name)
	}
	if len(pr.Keys) == 0 && len(pr.KeySecrets) == 0 && len(pr.Keyless) == 0 {
		p.add(n, "profile %q names no signer: give keys (cosign public key files), keySecrets (Secrets of cosign public keys, NAMESPACE/NAME) or keyless identities", pr.Name)
	}
	if len(pr.Keyless) > 0 && pr.TrustedRoot == "" {
		p.add(n, "profile %q has keyless identities but no trustedRoot: name the trusted root file (trusted_root.json) their certificates must chain to", pr.Name)
	}
	if len(pr.Keyless) == 0 && pr.TrustedRoot != "" {
		p.add(n, "profile %q names a trustedRoot but no keyless identity: the trusted root is only for keyless signatures", pr.Name)
	}
	if len(pr.Keyless) == 0 && pr.Tlog != "" {
		p.add(n, "profile %q sets tlog but names no keyless identity: tlog is only for keyless signatures", pr.Name)
	}
	if len(pr.Keyless) > 0 && pr.Tlog == "" {
		pr.Tlog = TlogRequired
	}
	return pr
}

// secretRefs reads keySecrets: NAMESPACE/NAME each, both DNS names.
func (p *parser) secretRefs(v *yaml.Node) []SecretRef {
	var out []SecretRef
	for _, m := range p.list(v, "keySecrets") {
		s := p.str(m, "keySecrets")
		if s == "" {
			continue
		}
		ns, name, ok := strings.Cut(s, "/")
		switch {
		case !ok || strings.Contains(name, "/"):
			p.add(m, "keySecrets %q: write NAMESPACE/NAME (e.g. fluxd/cosign-keys), the Secret whose *.pub keys are cosign public keys", s)
			continue
		case !namespaceName.MatchString(ns):
			p.add(m, "keySecrets %q: %q is not a namespace's name (lower-case letters, digits and dashes, at most 63)", s, ns)
			continue
		case len(name) > 253 || !secretName.MatchString(name):
			p.add(m, "keySecrets %q: %q is not a Secret's name (lower-case letters, digits, dashes and dots, at most 253)", s, name)
			continue
		}
		r := SecretRef{Namespace: ns, Name: name}
		if slices.Contains(out, r) {
			p.add(m, "keySecrets: %q is written twice", s)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (p *parser) identity(n *yaml.Node) Identity {
	id := Identity{Line: n.Line}
	var issuerRe, subjectRe string
	if !p.fields(n, "a keyless identity", func(key string, k, v *yaml.Node) bool {
		switch key {
		case "issuer":
			id.Issuer = p.str(v, key)
		case "issuerRegexp":
			issuerRe = p.str(v, key)
			id.IssuerRegexp = p.regexp(v, key, issuerRe)
		case "subject":
			id.Subject = p.str(v, key)
		case "subjectRegexp":
			subjectRe = p.str(v, key)
			id.SubjectRegexp = p.regexp(v, key, subjectRe)
		default:
			return false
		}
		return true
	}, "issuer", "issuerRegexp", "subject", "subjectRegexp") {
		return id
	}
	if (id.Issuer == "") == (issuerRe == "") {
		p.add(n, "a keyless identity needs exactly one of issuer and issuerRegexp (the OIDC issuer, e.g. https://token.actions.githubusercontent.com)")
	}
	if (id.Subject == "") == (subjectRe == "") {
		p.add(n, "a keyless identity needs exactly one of subject and subjectRegexp (the certificate's identity, e.g. a workflow URL or an e-mail)")
	}
	return id
}

func (p *parser) rule(n *yaml.Node) Rule {
	r := Rule{Line: n.Line}
	if !p.fields(n, "a repositories entry", func(key string, k, v *yaml.Node) bool {
		switch key {
		case "match":
			r.Match = p.str(v, key)
		case "profile":
			r.Profile = p.str(v, key)
		default:
			return false
		}
		return true
	}, "match", "profile") {
		return r
	}
	if r.Match == "" {
		p.add(n, "a repositories entry has no match (a glob such as ghcr.io/org/*)")
	} else if _, err := path.Match(r.Match, ""); err != nil {
		p.add(n, "match %q is not a glob: %v", r.Match, err)
	}
	if r.Profile == "" {
		p.add(n, "repositories %q names no profile", r.Match)
	}
	return r
}

// regexp compiles an identity's expression, which must be anchored: an
// unanchored subjectRegexp github.com/org would also match
// https://evil.example/github.com/org.
func (p *parser) regexp(v *yaml.Node, key, s string) *regexp.Regexp {
	if s == "" {
		return nil
	}
	if !strings.HasPrefix(s, "^") || !strings.HasSuffix(s, "$") {
		p.add(v, "%s %q is not anchored: write ^...$ so that it matches the whole identity, not a part of it", key, s)
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		p.add(v, "%s %q is not a regular expression: %v", key, s, err)
		return nil
	}
	return re
}

// fields calls f for each key of the mapping n; f returns false for a key
// it does not know, which is a problem named with the known ones.
// It reports false, with a problem, when n is not a mapping.
func (p *parser) fields(n *yaml.Node, what string, f func(key string, k, v *yaml.Node) bool, known ...string) bool {
	if n.Kind != yaml.MappingNode {
		p.add(n, "%s should be a mapping (key: value), not %s", what, kind(n))
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.add(k, "%s: a key should be a word, not %s", what, kind(k))
			continue
		}
		if seen[k.Value] {
			p.add(k, "%s: %s is written twice", what, k.Value)
			continue
		}
		seen[k.Value] = true
		if !f(k.Value, k, v) {
			p.add(k, "%s: unknown field %q (known: %s)", what, k.Value, strings.Join(known, ", "))
		}
	}
	return true
}

func (p *parser) list(n *yaml.Node, key string) []*yaml.Node {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, "%s should be a list, not %s", key, kind(n))
		return nil
	}
	return n.Content
}

func (p *parser) str(n *yaml.Node, key string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.add(n, "%s should be a string, not %s", key, kind(n))
		return ""
	}
	s := strings.TrimSpace(n.Value)
	if s == "" {
		p.add(n, "%s is empty", key)
	}
	return s
}

func (p *parser) strs(n *yaml.Node, key string) []string {
	var out []string
	for _, m := range p.list(n, key) {
		if s := p.str(m, key); s != "" {
			if slices.Contains(out, s) {
				p.add(m, "%s: %q is written twice", key, s)
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

func names(ps []Profile) string {
	var out []string
	for _, p := range ps {
		if p.Name != "" {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// Profile returns the profile named name.
func (c *Config) Profile(name string) (*Profile, bool) {
	for i := range c.Profiles {
		if c.Profiles[i].Name == name {
			return &c.Profiles[i], true
		}
	}
	return nil, false
}
