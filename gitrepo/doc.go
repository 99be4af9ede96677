// Package gitrepo reads and edits the workload definitions in a repository
// of manifests. It finds every Deployment, StatefulSet, DaemonSet and
// CronJob in the *.yaml and *.yml files under the configured paths
// (multi-document files and kind: List included), and changes container
// images by replacing exactly the bytes of the image value, located
// through yaml.v3's node positions: comments, key order, quoting and
// indentation stay as they were, byte for byte.
//
// The git working clone itself (go-git) is in gitrepo/gogit.
package gitrepo
