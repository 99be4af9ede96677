//go:build tools

// Package tools pins the Kubernetes control-plane binaries that the local
// stack runs. It is a module of its own so that the replace directives
// k8s.io/kubernetes needs never reach the product's go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
