package main

import (
	"context"
	"strings"
	"testing"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"google.golang.org/grpc"
)

// historyOnly answers History from memory.
type historyOnly struct {
	fluxdv1.FluxServiceClient
	events []*fluxdv1.Event
}

func (h historyOnly) History(context.Context, *fluxdv1.HistoryRequest, ...grpc.CallOption) (*fluxdv1.HistoryResponse, error) {
	return &fluxdv1.HistoryResponse{Events: h.events}, nil
}

// rollback goes back to the image before the last release that
// succeeded, skipping failed releases, their rollbacks and other events.
func TestPreviousImage(t *testing.T) {
	ch := func(from, to string) []*fluxdv1.Change {
		return []*fluxdv1.Change{{Service: "default:deployment/web", Container: "app", From: from, To: to}}
	}
	h := historyOnly{events: []*fluxdv1.Event{ // newest first
		{Type: "lock"},
		{Type: "rollback", Changes: ch("reg/web:1.3", "reg/web:1.2")},
		{Type: "failed", Changes: ch("reg/web:1.2", "reg/web:1.3"), Error: "rollout failed"},
		{Type: "automated-release", Changes: ch("reg/web:1.1", "reg/web:1.2")},
		{Type: "release", Changes: ch("reg/web:1.0", "reg/web:1.1")},
	}}
	if got, err := previousImage(context.Background(), h, "web"); err != nil || got != "reg/web:1.1" {
		t.Errorf("previousImage = %q, %v; want reg/web:1.1", got, err)
	}
	if _, err := previousImage(context.Background(), historyOnly{}, "web"); err == nil || !strings.Contains(err.Error(), "--to IMAGE") {
		t.Errorf("with no release recorded: %v", err)
	}
}

// After a batch that changed several services, rollback takes the named
// service's own image (found by review).
func TestPreviousImageAfterABatch(t *testing.T) {
	h := historyOnly{events: []*fluxdv1.Event{{Type: "automated-release", Changes: []*fluxdv1.Change{
		{Service: "default:deployment/api", Container: "app", From: "reg/api:3.0", To: "reg/api:3.1"},
		{Service: "default:deployment/web", Container: "app", From: "reg/web:1.0", To: "reg/web:1.1"},
	}}}}
	for _, typed := range []string{"web", "default/web", "deployment/web", "deploy/web", "default:deployment/web"} {
		if got, err := previousImage(context.Background(), h, typed); err != nil || got != "reg/web:1.0" {
			t.Errorf("previousImage(%q) = %q, %v; want reg/web:1.0", typed, got, err)
		}
	}
}

// servicesOnly answers ListServices from memory.
type servicesOnly struct {
	fluxdv1.FluxServiceClient
	services []*fluxdv1.Service
}

func (s servicesOnly) ListServices(context.Context, *fluxdv1.ListServicesRequest, ...grpc.CallOption) (*fluxdv1.ListServicesResponse, error) {
	return &fluxdv1.ListServicesResponse{Services: s.services}, nil
}

// A rollback of an automated service nothing holds is refused: the
// automator would undo it (found by the new-user trial).
func TestRollbackRefusesAnAutomatedService(t *testing.T) {
	c := servicesOnly{services: []*fluxdv1.Service{
		{Id: "default:deployment/worker", Automated: true},
		{Id: "default:deployment/held", Automated: true, Locked: true},
		{Id: "default:deployment/web"},
	}}
	if err := notAutomated(context.Background(), c, "worker"); err == nil || !strings.Contains(err.Error(), "fluxctl deautomate worker") {
		t.Errorf("rollback of an automated service: %v; want it refused, saying how to stop the automator", err)
	}
	for _, ok := range []string{"held", "web"} {
		if err := notAutomated(context.Background(), c, ok); err != nil {
			t.Errorf("rollback of %s: %v", ok, err)
		}
	}
}
