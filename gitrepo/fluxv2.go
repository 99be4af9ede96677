package gitrepo

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Flux v2's image automation, read from git as image-reflector-controller
// and image-automation-controller read it from the cluster: the
// ImageRepository (which image), the ImagePolicy (which tag), and the
// ImageUpdateAutomation (which files, and who commits). fluxd reads the
// objects from the repository, not from the cluster, so a repository
// written for Flux v2 works with no Flux v2 controllers running.

// fluxImageGroup is the API group of Flux v2's image automation.
const fluxImageGroup = "image.toolkit.fluxcd.io/"

// fluxImageVersions are the versions of fluxImageGroup fluxd reads.
var fluxImageVersions = map[string]bool{"v1beta2": true, "v1": true}

// NSName is a namespaced object's name.
type NSName struct{ Namespace, Name string }

func (n NSName) String() string { return n.Namespace + "/" + n.Name }

// ImageRepository is spec.image of a Flux v2 ImageRepository.
type ImageRepository struct {
	NSName
	Image string
	// Exclude is spec.exclusionList: nil when unset (Flux v2's default
	// applies), empty when set empty.
	Exclude []string
}

// ImagePolicy is a Flux v2 ImagePolicy as written.
type ImagePolicy struct {
	NSName
	File string
	Line int
	// Repository is spec.imageRepositoryRef (its namespace defaults to
	// the policy's).
	Repository NSName
	// SemverRange, Alphabetical/Numerical with Order ("asc" or "desc"),
	// Pattern and Extract are spec.policy and spec.filterTags.
	SemverRange             string
	Alphabetical, Numerical bool
	Order                   string
	Pattern, Extract        string
	// Exclude is its ImageRepository's exclusionList (nil: Flux v2's
	// default).
	Exclude []string
	// DigestReflection is spec.digestReflectionPolicy (Flux v2 2.6):
	// Never (the default, ""), IfNotPresent or Always.
	DigestReflection string
}

// ReflectsDigest reports whether the policy reflects its image's digest:
// its whole-image fields are then written repository:tag@digest and its
// :digest fields are set, as Flux v2 sets them.
func (p *ImagePolicy) ReflectsDigest() bool {
	return p != nil && (p.DigestReflection == "IfNotPresent" || p.DigestReflection == "Always")
}

// ImageUpdateAutomation is a Flux v2 ImageUpdateAutomation as written.
type ImageUpdateAutomation struct {
	NSName
	File string
	// Path is spec.update.path, relative to the repository's root ("."
	// when unset).
	Path string
	// Author is spec.git.commit.author.
	Author Signature
	// Suspend is spec.suspend: the automation does nothing.
	Suspend bool
}

// fieldSet is the fields of an object fluxd knows, by path below spec:
// true for those it uses, false for those it reads past on purpose (and
// says so in docs/migrate.md). A field not in it gets a warning.
type fieldSet map[string]bool

var (
	imageRepositoryFields = fieldSet{
		"image": true, "exclusionList": true, "interval": false, "timeout": false,
	}
	imagePolicyFields = fieldSet{
		"imageRepositoryRef": true, "imageRepositoryRef.name": true, "imageRepositoryRef.namespace": true,
		"policy": true, "policy.semver": true, "policy.semver.range": true,
		"policy.alphabetical": true, "policy.alphabetical.order": true,
		"policy.numerical": true, "policy.numerical.order": true,
		"filterTags": true, "filterTags.pattern": true, "filterTags.extract": true,
		"digestReflectionPolicy": true,
		"interval":               false,
	}
	imageUpdateAutomationFields = fieldSet{
		"update": true, "update.path": true, "update.strategy": true,
		"git": true, "git.commit": true, "git.commit.author": true, "git.commit.author.name": true, "git.commit.author.email": true,
		"suspend":   true,
		"sourceRef": false, "sourceRef.kind": false, "sourceRef.name": false, "sourceRef.namespace": false, "sourceRef.apiVersion": false,
		"interval": false,
	}
)

// unknownFields lists the fields under spec that set does not know, as
// dotted paths, sorted.
func unknownFields(spec *yaml.Node, set fieldSet) []string {
	var out []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if n == nil || n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := prefix + n.Content[i].Value
			if _, ok := set[p]; !ok {
				out = append(out, p)
				continue
			}
			walk(n.Content[i+1], p+".")
		}
	}
	walk(spec, "")
	sort.Strings(out)
	return out
}

// fluxObject reads a Flux v2 image automation object from a document's
// root, adding to a. It reports whether root was one.
func (a *ImageAutomation) readObject(file string, root *yaml.Node) bool {
	api := scalar(root, "apiVersion")
	if !strings.HasPrefix(api, fluxImageGroup) {
		return false
	}
	kind := scalar(root, "kind")
	md := lookup(root, "metadata")
	name := NSName{Namespace: scalar(md, "namespace"), Name: scalar(md, "name")}
	if name.Namespace == "" {
		name.Namespace = "default"
	}
	where := fmt.Sprintf("%s:%d: %s %s", file, root.Line, kind, name)
	warn := func(format string, args ...any) {
		a.Warnings = append(a.Warnings, where+": "+fmt.Sprintf(format, args...))
	}
	if v := strings.TrimPrefix(api, fluxImageGroup); !fluxImageVersions[v] {
		warn("apiVersion %s is not one fluxd reads (v1beta2, v1); it is skipped", api)
		return true
	}
	if name.Name == "" {
		warn("has no metadata.name; it is skipped")
		return true
	}
	spec := lookup(root, "spec")
	var set fieldSet
	switch kind {
	case "ImageRepository":
		set = imageRepositoryFields
		img := scalar(spec, "image")
		if img == "" {
			warn("has no spec.image; policies on it automate nothing")
		}
		r := ImageRepository{NSName: name, Image: img}
		if ex := lookup(spec, "exclusionList"); ex != nil && ex.Kind == yaml.SequenceNode {
			r.Exclude = []string{}
			for _, x := range ex.Content {
				r.Exclude = append(r.Exclude, x.Value)
			}
		}
		a.Repositories = append(a.Repositories, r)
	case "ImagePolicy":
		set = imagePolicyFields
		p := ImagePolicy{NSName: name, File: file, Line: root.Line}
		ref := lookup(spec, "imageRepositoryRef")
		p.Repository = NSName{Namespace: scalar(ref, "namespace"), Name: scalar(ref, "name")}
		if p.Repository.Namespace == "" {
			p.Repository.Namespace = name.Namespace
		}
		pol := lookup(spec, "policy")
		p.SemverRange = scalar(lookup(pol, "semver"), "range")
		if n := lookup(pol, "alphabetical"); n != nil {
			p.Alphabetical, p.Order = true, scalar(n, "order")
		}
		if n := lookup(pol, "numerical"); n != nil {
			p.Numerical, p.Order = true, scalar(n, "order")
		}
		ft := lookup(spec, "filterTags")
		p.Pattern, p.Extract = scalar(ft, "pattern"), scalar(ft, "extract")
		switch r := scalar(spec, "digestReflectionPolicy"); r {
		case "", "Never":
		case "IfNotPresent", "Always":
			p.DigestReflection = r
		default:
			warn("digestReflectionPolicy %q is none of Never, IfNotPresent and Always; it is read as Never, the default", r)
		}
		if p.Order != "" && p.Order != "asc" && p.Order != "desc" {
			warn("order %q is neither asc nor desc; it is read as asc, the default", p.Order)
			p.Order = ""
		}
		a.Policies = append(a.Policies, p)
	case "ImageUpdateAutomation":
		set = imageUpdateAutomationFields
		u := ImageUpdateAutomation{NSName: name, File: file, Path: scalar(lookup(spec, "update"), "path")}
		if s := scalar(lookup(spec, "update"), "strategy"); s != "" && s != "Setters" {
			warn("update.strategy %q is not Setters, the only one Flux v2 and fluxd know; the automation is skipped", s)
			return true
		}
		author := lookup(spec, "git", "commit", "author")
		u.Author = Signature{Name: scalar(author, "name"), Email: scalar(author, "email")}
		u.Suspend = scalar(spec, "suspend") == "true"
		if u.Path == "" {
			u.Path = "."
		}
		a.Automations = append(a.Automations, u)
	default:
		return true // ImagePolicy's kin fluxd has no use for
	}
	if extra := unknownFields(spec, set); len(extra) > 0 {
		warn("fluxd does not honour spec.%s; see docs/migrate.md", strings.Join(extra, ", spec."))
	}
	return true
}
