package platform

import (
	"errors"
	"time"
)

// ErrNoLog is a pod log its node did not serve: a node whose kubelet
// serves no logs (a fake node), or one that is down.
var ErrNoLog = errors.New("the pod's node did not serve its log")

// Resources is what a workload runs in the cluster: what it owns between
// it and its pods (a Deployment's ReplicaSets, a CronJob's Jobs), its
// pods, and their recent events.
type Resources struct {
	Owned  []Owned
	Pods   []Pod
	Events []Event
}

// Owned is a ReplicaSet of a Deployment, or a Job of a CronJob.
type Owned struct {
	Kind, Name string
	// Revision is a ReplicaSet's deployment revision.
	Revision       string
	Desired, Ready int32
	Images         []string
	Created        time.Time
}

// Pod is one pod of a workload.
type Pod struct {
	Name string
	// Owner is the Owned the pod belongs to; empty when the workload owns
	// it directly.
	Owner string
	// Status reads as kubectl's STATUS column.
	Status     string
	Ready      bool
	Restarts   int32
	Node       string
	Created    time.Time
	Containers []PodContainer
}

// PodContainer is one container of a pod, as its status says.
type PodContainer struct {
	Name, Image string
	Init        bool
	Ready       bool
	Restarts    int32
	// State is "running", "waiting" or "terminated"; Reason says why.
	State, Reason string
}

// Event is a Kubernetes event about a workload, what it owns or a pod.
type Event struct {
	// Object is "Kind/name".
	Object                string
	Type, Reason, Message string
	Count                 int32
	LastSeen              time.Time
}

// LogOptions bound a read of a pod's log.
type LogOptions struct {
	// Container is the container's name; empty: the pod's first.
	Container string
	// TailLines is how many of the last lines to read.
	TailLines int64
	// LimitBytes bounds what is read.
	LimitBytes int64
}

// PodLog is the tail of a pod's log.
type PodLog struct {
	Container string
	Lines     []string
	// Truncated says the log was cut at LogOptions.LimitBytes.
	Truncated bool
}

// Comparison is a workload's live object beside what applying git would
// make of it.
type Comparison struct {
	// Live is the object in the cluster, as YAML, without managedFields;
	// empty when it is not there.
	Live []byte
	// Action is "unchanged", "configured" or "created".
	Action string
	// Diff lists the fields applying git would change.
	Diff []string
}
