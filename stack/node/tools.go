//go:build tools

// Package tools pins the kubelet of the local stack's real node. It is a
// module apart from tools/kube (same Kubernetes version, same replace
// directives) so that its build has a cache key of its own: adding or
// changing the node never rebuilds the control plane, and the other way round.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
