package auth

import "fmt"

// Role is what a token may do. Roles are ordered: each may do what the
// ones below it may.
type Role int

const (
	// Viewer may only read.
	Viewer Role = iota + 1
	// Deployer may also release, automate and lock.
	Deployer
	// Admin may do everything.
	Admin
)

// String returns the role's name as written in the tokens file.
func (r Role) String() string {
	switch r {
	case Viewer:
		return "viewer"
	case Deployer:
		return "deployer"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole parses a role name as written in the tokens file.
func ParseRole(s string) (Role, error) {
	switch s {
	case "viewer":
		return Viewer, nil
	case "deployer":
		return Deployer, nil
	case "admin":
		return Admin, nil
	}
	return 0, fmt.Errorf("unknown role %q: use viewer, deployer or admin", s)
}

// Identity is who a token speaks for.
type Identity struct {
	// Instance keys every record the caller reads or writes: callers of one
	// instance never see another's data.
	Instance string
	// Role bounds what the caller may do.
	Role Role
	// Scope is where the instance may act; nil: everywhere.
	Scope *Scope
}

// Allows reports whether the identity holds at least the role need.
func (id Identity) Allows(need Role) bool { return id.Role >= need }
