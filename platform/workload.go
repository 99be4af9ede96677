package platform

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned when a workload does not exist.
var ErrNotFound = errors.New("workload not found")

// Kinds are the workload kinds fluxd manages, in lower case as they appear
// in IDs.
// "imagepolicy" is a Flux v2 ImagePolicy read from git: the service of
// the fields its setter markers mark (see docs/migrate.md).
var Kinds = []string{"deployment", "statefulset", "daemonset", "cronjob", KindHelmRelease, "imagepolicy"}

// KindHelmRelease is a Flux HelmRelease (helm.toolkit.fluxcd.io, or Flux
// v1's helm.fluxcd.io/v1): its containers are the images its values name
// (package helmrelease), and its rollout is its controller's Ready
// condition.
const KindHelmRelease = "helmrelease"

// ID identifies a workload as namespace:kind/name, the Flux convention.
type ID struct {
	Namespace string
	Kind      string // lower case, one of Kinds
	Name      string
}

func (id ID) String() string { return id.Namespace + ":" + id.Kind + "/" + id.Name }

// Compare orders IDs as their String forms order (strings.Compare of
// a.String() and b.String()), without building them: sorting 10,000
// services by String allocated two strings per comparison, most of the
// cost of the daemon's view at that size.
func (id ID) Compare(o ID) int {
	a := [5]string{id.Namespace, ":", id.Kind, "/", id.Name}
	b := [5]string{o.Namespace, ":", o.Kind, "/", o.Name}
	// Walk both forms a run at a time: each step compares as much as
	// is left of the shorter current part.
	i, j := 0, 0
	x, y := a[0], b[0]
	for {
		for x == "" && i < len(a)-1 {
			i++
			x = a[i]
		}
		for y == "" && j < len(b)-1 {
			j++
			y = b[j]
		}
		switch {
		case x == "" && y == "":
			return 0
		case x == "":
			return -1
		case y == "":
			return 1
		}
		n := min(len(x), len(y))
		if c := strings.Compare(x[:n], y[:n]); c != 0 {
			return c
		}
		x, y = x[n:], y[n:]
	}
}

// ParseID parses a full ID, "namespace:kind/name".
func ParseID(s string) (ID, error) {
	ns, rest, ok := strings.Cut(s, ":")
	kind, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || ns == "" || kind == "" || name == "" {
		return ID{}, fmt.Errorf("service ID %q is not of the form namespace:kind/name", s)
	}
	kind = strings.ToLower(kind)
	if !knownKind(kind) {
		return ID{}, fmt.Errorf("service ID %q has kind %q; fluxd manages %s", s, kind, strings.Join(Kinds, ", "))
	}
	return ID{Namespace: ns, Kind: kind, Name: name}, nil
}

func knownKind(k string) bool {
	for _, want := range Kinds {
		if k == want {
			return true
		}
	}
	return false
}

// Container is one container of a workload.
type Container struct {
	Name  string
	Image string
	Init  bool
}

// Replicas counts a workload's pods against what it wants.
type Replicas struct {
	Desired, Updated, Ready, Available int32
}

// Workload is one workload as the cluster reports it.
type Workload struct {
	ID         ID
	Containers []Container
	// Status is "ready" once the latest spec has rolled out, else "updating".
	Status   string
	Replicas Replicas
	// Generation is the spec's generation; ObservedGeneration the one the
	// controller has acted on. A rollout is done only when they agree.
	Generation, ObservedGeneration int64
	// Stuck, when set, says why the rollout cannot finish, as the
	// controller reports it (e.g. its progress deadline passed).
	Stuck string
}

// RolledOut reports whether the workload's spec of generation gen (or a
// later one) has fully rolled out.
func (w Workload) RolledOut(gen int64) bool {
	return w.ObservedGeneration >= gen && w.Generation >= gen && w.Status == "ready"
}
