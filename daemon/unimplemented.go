package daemon

import (
	"context"

	"github.com/fluxd/fluxd/internal/fluxerr"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// The methods below are declared by the API and built by later issues.
// Each answers codes.Unimplemented with a message naming what is missing,
// never a fake success.

const (
	issueAutomation = "issue [automation]"
)

func notBuilt(what, issue string) error { return toStatus(fluxerr.NotImplemented(what, issue)) }

func (s *Server) SetPolicy(context.Context, *fluxdv1.SetPolicyRequest) (*fluxdv1.SetPolicyResponse, error) {
	return nil, notBuilt("SetPolicy (tag filters)", issueAutomation)
}
