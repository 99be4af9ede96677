package policy

// The signature verification annotations (issue 33): the profile of
// fluxd --verify-config that a workload's images must pass, for all its
// containers or, after the dot, for one. Package verify reads them
// (verify.Annotated); release refuses a workload that asks for one while
// fluxd runs without a verification config.
const (
	Verify       = "fluxd.io/verify"
	VerifyPrefix = "fluxd.io/verify."
)
