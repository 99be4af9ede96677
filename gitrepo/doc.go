// Package gitrepo reads and edits the workload definitions in a repository
// of manifests.
//
// Reading: every Deployment, StatefulSet, DaemonSet and CronJob in the
// *.yaml and *.yml files under the configured paths, in multi-document
// files, in kind: List and in typed lists (DeploymentList, StatefulSetList,
// DaemonSetList, CronJobList, ...), whose items may leave out kind and
// apiVersion as kubectl allows; WorkloadDocument then gives such an item
// the list's. A Flux HelmRelease is a workload too (helm.go): its
// containers are the images of its spec.values (package helmrelease), and
// SetImages writes them there, in the form they have.
//
// Editing: SetImages changes container images and SetAnnotations sets or
// removes (value "") metadata.annotations, in any valid YAML: block or flow
// style, plain, single- or double-quoted values with escapes, literal (|)
// and folded (>) block scalars, values over several lines, CRLF line
// endings. yaml.v3 nodes say where the value to change starts; where it
// ends is found by scanning as yaml.v3's scanner does (package
// gitrepo/format/yamledit, the byte-span editing every format shares), and
// only those bytes are replaced, so comments, key order, quoting and
// indentation elsewhere stay byte for byte. Images keep their quoting where
// the new value allows it; annotation values are written double-quoted,
// with escapes YAML reads back. New annotations are inserted as lines in
// block style, or into the flow mapping ({...}) where metadata or
// annotations are written that way.
//
// Every edit is read back before it is returned (verify.go): the file is
// decoded before and after, as Kubernetes would read it, and must differ
// only in the intended values; otherwise the edit fails with an error that
// says where, and nothing is committed. FuzzSetImages and
// FuzzSetAnnotations check these properties on arbitrary input.
//
// Flux v2's image automation is read here too (fluxv2.go, setters.go,
// imageautomation.go): ImageRepository, ImagePolicy and
// ImageUpdateAutomation objects, and fields marked with $imagepolicy
// comments. Each ImagePolicy is a service whose containers are the fields
// it marks (in plain files, List items, kustomizations' images: entries
// and inline patches, and bases that overlays build from, each field
// named with its object's namespace); SetSetters edits them as SetImages
// edits images, and FuzzSetSetters checks it. The Flux v2 fixtures under
// testdata/setters and testdata/automation (txtar) name the peer rule
// each checks.
//
// Every Definition carries its Format (format.go): plain, kustomize,
// setters or helm. What a release does with each (where its edit goes,
// what it moves, where its policy is written) is in package
// gitrepo/format, one package per format behind one Handler.
//
// The git working clone itself (go-git) is in gitrepo/gogit.
package gitrepo
