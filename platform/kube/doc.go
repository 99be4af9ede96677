// Package kube is the Kubernetes adapter of package platform. It keeps
// informer caches of Deployments, StatefulSets, DaemonSets and CronJobs, so
// that reads never reach the API server per call.
package kube
