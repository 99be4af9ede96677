// Package e2e holds the end-to-end tests: they start the real local stack
// (etcd, the Kubernetes control plane, kwok nodes, an OCI registry and a
// git remote) once per test binary, run the real fluxd and fluxctl
// binaries against it, and check what a user would check.
//
// make test runs the binary as three shards side by side, each with its
// own stack (hack/e2eshard; docs/development.md): a test shares its stack
// only with the tests of its shard. A test that needs the real node says
// so with requireRealNode (or localstack.OnRealNode): that is how it lands
// in the one shard that starts a real node.
//
// Run one feature's tests with its file's names, for example
// bin=$(stack/build.sh) && FLUXD_STACK_BIN=$bin go test -count=1 -run 'TestSyncAppliesGit' ./e2e/
//
// # Which file tests which feature
//
//	feature                                   file(s)
//	-------                                   -------
//	stack and the shared fluxd (TestMain)     main_test.go
//	helpers three or more files share         helpers_test.go
//	gRPC API: tokens, roles                   api_test.go
//	fluxctl: commands, humane errors          cli_test.go, ux_test.go
//	fluxctl check (repository linting)        check_test.go
//	fluxctl over TLS                          tls_test.go
//	release: plan, execute, jobs, locks       release_test.go, ux_test.go
//	release invariants (hotfix kept, HPA)     invariants_test.go
//	rollback and the job view                 ux_test.go
//	automation and tag policies               release_test.go, tagpolicy_test.go
//	pinned digests                            pin_test.go
//	image signatures (--verify-config)        verify_test.go
//	registry: pull secrets, 429 storms        registry_test.go
//	registry credentials (auth registry)      regauth_test.go
//	a 2,000-tag repository never read         bigrepo_test.go
//	image webhooks and notifications          registry_test.go, notify_test.go, webhookburst_test.go
//	sync: apply, drift, kustomize, off        sync_test.go, syncchange_test.go
//	sync inventory and pruning                syncinventory_test.go, syncchange_test.go
//	sync refuses cluster-wide take-overs      gitguard_test.go
//	sync honours Flux v1's ignore             ignore_test.go
//	a release during a big sync goes first    syncpreempt_test.go
//	Flux v1 migration (annotations)           migrate_test.go
//	Flux v2 image automation                  fluxv2_test.go
//	HelmReleases                              helmrelease_test.go
//	leader election and failover              takeover_test.go, leaderclone_test.go, notify_test.go
//	a taken-over job (revert, targets)        takeoverrevert_test.go, takeovertargets_test.go, release_test.go
//	faults: SIGTERM, stalls, restarts         faults_test.go, postgres_test.go
//	history on PostgreSQL                     postgres_test.go, takeover_test.go
//	two scoped instances                      scope_test.go
//	git over SSH with a deploy key            ssh_test.go
//	SSRF: a viewer cannot make fluxd fetch    ssrf_test.go
//	status page in a browser (Chromium)       web_test.go, web_workload_test.go, webfollower_test.go
//	  its browser helpers                     statuspage_test.go
//	metrics and the dashboard                 metrics_test.go, rollout_test.go
//	promotion gates: job checks on the stack  gates_test.go (TestJobCheckOnTheRealNode: real node)
//	promotion: stages, soak, SIGKILL, gates   promotion_test.go, promotionfaults_test.go (TestPromotionJobCheckOnTheRealNode: real node)
//	rollouts seen in the cluster              rollout_test.go
//	install: manifests, fluxctl install       deploy_test.go, install_test.go
//	install: Helm chart and guide             helm_test.go, installguide_test.go
//	docs: the workflow guide runs             docs_test.go
//	docs: the promotion guide runs            promotionguide_test.go (docs/promotion.md)
//	docs: the signing guide runs              signingguide_test.go (docs/security.md)
//	fluxd in a pod, rolling upgrade           fluxdpod_test.go, fluxdupgrade_test.go (real nodes)
//	real nodes and rollouts                   realnode_test.go, realrollout_test.go (real nodes)
//	randomized torture suite                  torture_test.go (make torture)
//	benchmarks                                apiload_bench_test.go (its side-by-side run: apiside_test.go),
//	                                          latency_bench_test.go, sync_bench_test.go, scale_bench_test.go
//	                                          (its memory cgroup: cgroup_bench_test.go)
//
// Shared helpers: helpers_test.go holds those that three or more test
// files use (kubectl and git clients, fluxctl, polling, rollouts, the fault
// fluxd, manifests pushed to git, the browser's waits); main_test.go
// starts the stack and the shared fluxd; statuspage_test.go opens the
// page signed in. A helper of one feature stays in that feature's file.
package e2e
