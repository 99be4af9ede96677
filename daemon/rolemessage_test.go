package daemon

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Every method a viewer may not call names the commands that call it, so
// a refused user reads "fluxctl lock", the command they typed.
func TestRoleRefusalNamesTheCommand(t *testing.T) {
	for _, m := range fluxdv1.FluxService_ServiceDesc.Methods {
		full := "/" + fluxdv1.FluxService_ServiceDesc.ServiceName + "/" + m.MethodName
		if readOnly[full] || full == fluxdv1.FluxService_Release_FullMethodName {
			continue
		}
		if commandsOf[full] == "" {
			t.Errorf("%s needs the deployer role and names no command in commandsOf", m.MethodName)
		}
	}
	f := newFixture(t, &stubCluster{})
	_, err := f.client.SetPolicy(withToken(f.tokens[auth.Viewer]), &fluxdv1.SetPolicyRequest{Service: "default:deployment/x"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "SetPolicy (fluxctl lock, unlock, automate, deautomate, policy) needs the deployer role") {
		t.Errorf("a viewer's lock: %v", err)
	}
}

// A history call asks for at most 10,000 events: more is refused with
// what to do, not answered (a viewer could make fluxd hold any size).
func TestHistoryLimitIsBounded(t *testing.T) {
	f, _ := scopedFixture(t)
	ctx := withToken(f.other[auth.Viewer])
	if _, err := f.client.History(ctx, &fluxdv1.HistoryRequest{Limit: maxHistoryLimit}); err != nil {
		t.Fatalf("the largest limit: %v", err)
	}
	_, err := f.client.History(ctx, &fluxdv1.HistoryRequest{Limit: maxHistoryLimit + 1})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("a limit past the bound: %v", err)
	}
}
