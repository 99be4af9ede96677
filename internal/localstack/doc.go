// Package localstack runs the real local stack that fluxd's tests and demo
// use: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok (fake nodes, so Deployments really schedule and roll out), an OCI
// registry, and a bare git repository seeded with example manifests whose
// images are pushed to the registry.
//
// Every component listens on loopback on a free port and keeps its state,
// logs and PID file under one directory, so a test's stack never collides
// with one started by 'make up'. The binaries come from stack/build.sh.
package localstack
