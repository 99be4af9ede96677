package daemon

import (
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Conversions between domain types and protobuf live here, and only here.

func roleToProto(r auth.Role) fluxdv1.Role {
	switch r {
	case auth.Viewer:
		return fluxdv1.Role_ROLE_VIEWER
	case auth.Deployer:
		return fluxdv1.Role_ROLE_DEPLOYER
	case auth.Admin:
		return fluxdv1.Role_ROLE_ADMIN
	}
	return fluxdv1.Role_ROLE_UNSPECIFIED
}

func serviceToProto(w platform.Workload) *fluxdv1.Service {
	s := &fluxdv1.Service{
		Id:     w.ID.String(),
		Status: w.Status,
		Replicas: &fluxdv1.ReplicaCounts{
			Desired: w.Replicas.Desired, Updated: w.Replicas.Updated,
			Ready: w.Replicas.Ready, Available: w.Replicas.Available,
		},
	}
	for _, c := range w.Containers {
		s.Containers = append(s.Containers, &fluxdv1.Container{Name: c.Name, Image: c.Image, Init: c.Init})
	}
	return s
}
