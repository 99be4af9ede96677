package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/randfill"

	"github.com/fluxd/fluxd/platform"
)

// Every reader of the caches (slim.go lists them) says the same of a
// workload before and after it is slimmed. The objects are filled at
// random, every field of them (randfill), so that a reader that starts
// using a field slimWorkload drops sees a difference; then the fields the
// readers use are drawn from small sets, so that their branches are
// taken: a stuck rollout, a Helm release's labels, a pull secret that
// exists. A failure names its seed: rerun it with
// -run 'TestSlimWorkloadKeepsWhatIsRead/seed=N$'.
func TestSlimWorkloadKeepsWhatIsRead(t *testing.T) {
	client := fake.NewClientset(pullFixtures()...)
	for seed := range uint64(200) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			objs := randomWorkloads(seed)
			slim := make([]runtime.Object, len(objs))
			for i, o := range objs {
				s, err := slimCached(o.DeepCopyObject())
				if err != nil {
					t.Fatalf("seed %d: slimming %T: %v", seed, o, err)
				}
				slim[i] = s.(runtime.Object)
				again, _ := slimWorkload(s.(runtime.Object).DeepCopyObject())
				if diff := cmp.Diff(s, again); diff != "" {
					t.Errorf("seed %d: slimming %T twice changed it again (-once +twice):\n%s", seed, o, diff)
				}
			}
			want, got := readCached(t, client, objs), readCached(t, client, slim)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(helmOwned{}, helmKey{})); diff != "" {
				t.Errorf("seed %d: fluxd reads the slimmed workloads differently (-whole +slimmed):\n%s", seed, diff)
			}
		})
	}
}

// What is dropped is gone, and what is read is still there.
func TestSlimWorkloadDropsTheRest(t *testing.T) {
	for _, o := range bigWorkloads() {
		before := o.DeepCopyObject()
		s, err := slimCached(o)
		if err != nil {
			t.Fatal(err)
		}
		m := s.(metav1.Object)
		name := fmt.Sprintf("%T %s", s, m.GetName())
		if m.GetManagedFields() != nil {
			t.Errorf("%s kept its managedFields", name)
		}
		if _, ok := m.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
			t.Errorf("%s kept kubectl's last-applied-configuration", name)
		}
		if m.GetAnnotations()["meta.helm.sh/release-name"] != "web" || m.GetLabels()["app"] != "web" {
			t.Errorf("%s lost annotations or labels fluxd reads: %v, %v", name, m.GetAnnotations(), m.GetLabels())
		}
		var spec corev1.PodTemplateSpec
		switch w := s.(type) {
		case *appsv1.Deployment:
			spec = w.Spec.Template
			if w.Spec.Selector != nil || w.Spec.Strategy.RollingUpdate != nil {
				t.Errorf("%s kept its selector or strategy", name)
			}
			if len(w.Status.Conditions) != 1 || w.Status.Conditions[0].Type != appsv1.DeploymentProgressing {
				t.Errorf("%s: conditions %v, want its Progressing condition alone", name, w.Status.Conditions)
			}
			if *w.Spec.Replicas != 3 || w.Status.UpdatedReplicas != 2 {
				t.Errorf("%s lost its replicas", name)
			}
		case *appsv1.StatefulSet:
			spec = w.Spec.Template
			if w.Spec.VolumeClaimTemplates != nil || w.Status.UpdateRevision != "" {
				t.Errorf("%s kept its volume claim templates or revisions", name)
			}
		case *appsv1.DaemonSet:
			spec = w.Spec.Template
		case *batchv1.CronJob:
			spec = w.Spec.JobTemplate.Spec.Template
			if w.Spec.Schedule != "" || w.Status.Active != nil {
				t.Errorf("%s kept its schedule or active Jobs", name)
			}
		}
		if spec.Labels != nil || spec.Spec.Volumes != nil || spec.Spec.NodeSelector != nil {
			t.Errorf("%s kept its pod template's labels, volumes or node selector", name)
		}
		want := []corev1.Container{{Name: "init", Image: "r/init:1"}, {Name: "web", Image: "r/web:1.2.3"}}
		if diff := cmp.Diff(want, append(spec.Spec.InitContainers, spec.Spec.Containers...)); diff != "" {
			t.Errorf("%s: containers (-want +got):\n%s", name, diff)
		}
		if spec.Spec.ServiceAccountName != "builder" || len(spec.Spec.ImagePullSecrets) != 1 {
			t.Errorf("%s lost its service account or pull secrets", name)
		}
		whole, slimmed := jsonSize(t, before), jsonSize(t, s)
		t.Logf("%s: %d bytes of JSON whole, %d slimmed", name, whole, slimmed)
		if slimmed*3 > whole {
			t.Errorf("%s: %d bytes slimmed of %d, want under a third", name, slimmed, whole)
		}
	}
}

// A tombstone, and an object of another kind, go through slimWorkload
// untouched; a tombstone goes through the informers' transform untouched
// too (its object is already in the cache, where readers may hold it).
func TestSlimWorkloadLeavesOtherObjectsAlone(t *testing.T) {
	for name, transform := range map[string]cache.TransformFunc{"slimWorkload": slimWorkload, "slimCached": slimCached} {
		tomb := cache.DeletedFinalStateUnknown{Key: "default/web", Obj: bigWorkloads()[0]}
		got, err := transform(tomb)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(any(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: bigWorkloads()[0]}), got); diff != "" {
			t.Errorf("%s changed a tombstone (-want +got):\n%s", name, diff)
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string]string{"k": "v"},
	}
	want := cm.DeepCopy()
	got, err := slimWorkload(cm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a ConfigMap changed (-want +got):\n%s", diff)
	}
}

// The cluster's informers store slimmed workloads, and Workloads reads
// from them what it reads from the whole objects.
func TestWorkloadCachesHoldSlimObjects(t *testing.T) {
	whole := bigWorkloads()
	client := fake.NewClientset(append(whole, pullFixtures()...)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(client, "fake", Config{Namespaces: []string{"default"}})
	c.Start(ctx)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	l := c.deploys[0]
	ds, _ := l.deployments()
	ss, _ := l.statefulsets()
	dss, _ := l.daemonsets()
	cjs, _ := l.cronjobs()
	var cached []runtime.Object
	for _, d := range ds {
		cached = append(cached, d)
	}
	for _, s := range ss {
		cached = append(cached, s)
	}
	for _, d := range dss {
		cached = append(cached, d)
	}
	for _, cj := range cjs {
		cached = append(cached, cj)
	}
	var want []runtime.Object
	for _, o := range bigWorkloads() {
		s, _ := slimWorkload(o)
		want = append(want, s.(runtime.Object))
	}
	if diff := cmp.Diff(want, cached); diff != "" {
		t.Errorf("cached workloads (-slimmed +cached):\n%s", diff)
	}
	got, err := c.Workloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readCached(t, client, whole).Workloads, got); diff != "" {
		t.Errorf("Workloads (-from whole objects +from the caches):\n%s", diff)
	}
}

// cachedRead is everything fluxd reads from cached workloads.
type cachedRead struct {
	Workloads   []platform.Workload
	Owners      []*helmOwned
	PullSecrets []PullSecret
}

// readCached runs the caches' readers on objs, as if the caches held
// them; client answers PullSecrets' reads of ServiceAccounts and Secrets.
func readCached(t *testing.T, client kubernetes.Interface, objs []runtime.Object) cachedRead {
	t.Helper()
	var l cacheLister
	var ds []*appsv1.Deployment
	var ss []*appsv1.StatefulSet
	var dss []*appsv1.DaemonSet
	var cjs []*batchv1.CronJob
	var out cachedRead
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.Deployment:
			ds = append(ds, w)
			out.Owners = append(out.Owners, helmOwner(w, fromDeployment(w).Replicas))
		case *appsv1.StatefulSet:
			ss = append(ss, w)
			out.Owners = append(out.Owners, helmOwner(w, fromStatefulSet(w).Replicas))
		case *appsv1.DaemonSet:
			dss = append(dss, w)
			out.Owners = append(out.Owners, helmOwner(w, fromDaemonSet(w).Replicas))
		case *batchv1.CronJob:
			cjs = append(cjs, w)
		default:
			t.Fatalf("not a workload: %T", o)
		}
	}
	l.deployments = func() ([]*appsv1.Deployment, error) { return ds, nil }
	l.statefulsets = func() ([]*appsv1.StatefulSet, error) { return ss, nil }
	l.daemonsets = func() ([]*appsv1.DaemonSet, error) { return dss, nil }
	l.cronjobs = func() ([]*batchv1.CronJob, error) { return cjs, nil }
	c := &Cluster{client: client, deploys: []cacheLister{l}}
	var err error
	if out.Workloads, err = c.Workloads(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.PullSecrets, err = c.PullSecrets(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// The values the readers look at are drawn from these, so that their
// branches are taken.
var (
	slimNamespaces  = []string{"default", "other"}
	slimImages      = []string{"r/web:1", "r/web:2", "ghcr.io/o/side:v1", "quay.io/x/init@sha256:" + strings.Repeat("a", 64), ""}
	slimPullSecrets = []string{"pull-1", "pull-2", "missing"} // missing has no Secret
	slimAccounts    = []string{"", "default", "builder", "nobody"}
	slimCondTypes   = []appsv1.DeploymentConditionType{appsv1.DeploymentProgressing, appsv1.DeploymentAvailable, appsv1.DeploymentReplicaFailure}
	slimCondStatus  = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}
	slimCondReasons = []string{"ProgressDeadlineExceeded", "NewReplicaSetAvailable", "ReplicaSetUpdated"}
	slimHelmNames   = []string{"", "web", "db"}
)

// pullFixtures are the ServiceAccounts and pull Secrets of slimNamespaces:
// default's and builder's accounts name pull secrets, nobody has no
// account.
func pullFixtures() []runtime.Object {
	var out []runtime.Object
	for _, ns := range slimNamespaces {
		for _, name := range []string{"pull-1", "pull-2", "sa-pull"} {
			out = append(out, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Type:       corev1.SecretTypeDockerConfigJson,
				Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + name + `.example":{}}}`)},
			})
		}
		out = append(out,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "sa-pull"}}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull-2"}, {Name: "missing"}}})
	}
	return out
}

// randomWorkloads is one to six workloads of random kinds, every field
// filled at random and then the fields fluxd reads drawn from the sets
// above.
func randomWorkloads(seed uint64) []runtime.Object {
	r := rand.New(rand.NewPCG(seed, 0))
	f := randfill.NewWithSeed(int64(seed)).NilChance(0.2).NumElements(1, 3).MaxDepth(8)
	var out []runtime.Object
	for i := range 1 + r.IntN(6) {
		switch r.IntN(4) {
		case 0:
			d := &appsv1.Deployment{}
			f.Fill(d)
			randomMeta(r, &d.ObjectMeta, i)
			d.Spec.Replicas = randomReplicas(r)
			randomPodSpec(r, &d.Spec.Template.Spec)
			st := &d.Status
			st.ObservedGeneration = r.Int64N(4)
			st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas = r.Int32N(5), r.Int32N(5), r.Int32N(5), r.Int32N(5)
			st.Conditions = nil
			for range r.IntN(4) {
				st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{
					Type: pick(r, slimCondTypes), Status: pick(r, slimCondStatus), Reason: pick(r, slimCondReasons),
					Message: fmt.Sprintf("message %d", r.IntN(100)), LastUpdateTime: metav1.Unix(r.Int64N(1e9), 0),
				})
			}
			out = append(out, d)
		case 1:
			s := &appsv1.StatefulSet{}
			f.Fill(s)
			randomMeta(r, &s.ObjectMeta, i)
			s.Spec.Replicas = randomReplicas(r)
			randomPodSpec(r, &s.Spec.Template.Spec)
			st := &s.Status
			st.ObservedGeneration = r.Int64N(4)
			st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas = r.Int32N(5), r.Int32N(5), r.Int32N(5), r.Int32N(5)
			out = append(out, s)
		case 2:
			d := &appsv1.DaemonSet{}
			f.Fill(d)
			randomMeta(r, &d.ObjectMeta, i)
			randomPodSpec(r, &d.Spec.Template.Spec)
			st := &d.Status
			st.ObservedGeneration = r.Int64N(4)
			st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.UpdatedNumberScheduled = r.Int32N(5), r.Int32N(5), r.Int32N(5)
			st.NumberReady, st.NumberAvailable = r.Int32N(5), r.Int32N(5)
			out = append(out, d)
		case 3:
			cj := &batchv1.CronJob{}
			f.Fill(cj)
			randomMeta(r, &cj.ObjectMeta, i)
			randomPodSpec(r, &cj.Spec.JobTemplate.Spec.Template.Spec)
			out = append(out, cj)
		}
	}
	return out
}

func randomMeta(r *rand.Rand, m *metav1.ObjectMeta, i int) {
	m.Namespace = pick(r, slimNamespaces)
	m.Name = fmt.Sprintf("w%d", i) // unique: Workloads sorts by ID
	m.Generation = r.Int64N(4)
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	set := func(to map[string]string, k, v string) {
		if v != "" {
			to[k] = v
		}
	}
	set(m.Labels, "helm.toolkit.fluxcd.io/name", pick(r, slimHelmNames))
	set(m.Labels, "helm.toolkit.fluxcd.io/namespace", pick(r, append([]string{""}, slimNamespaces...)))
	set(m.Labels, "app.kubernetes.io/instance", pick(r, slimHelmNames))
	set(m.Labels, "app.kubernetes.io/managed-by", pick(r, []string{"", "Helm", "Tiller", "kustomize"}))
	set(m.Annotations, "meta.helm.sh/release-name", pick(r, slimHelmNames))
	set(m.Annotations, "meta.helm.sh/release-namespace", pick(r, append([]string{""}, slimNamespaces...)))
	if r.IntN(2) == 0 {
		m.Annotations[corev1.LastAppliedConfigAnnotation] = fmt.Sprintf(`{"apiVersion":"apps/v1","metadata":{"name":%q}}`, m.Name)
	}
}

func randomReplicas(r *rand.Rand) *int32 {
	if r.IntN(4) == 0 {
		return nil
	}
	n := r.Int32N(4)
	return &n
}

// randomPodSpec keeps randfill's containers (their env, probes, mounts...)
// but for their names and images, and some of them.
func randomPodSpec(r *rand.Rand, spec *corev1.PodSpec) {
	spec.InitContainers = spec.InitContainers[:r.IntN(len(spec.InitContainers)+1)]
	for i := range spec.InitContainers {
		spec.InitContainers[i].Name, spec.InitContainers[i].Image = fmt.Sprintf("init%d", i), pick(r, slimImages)
	}
	for i := range spec.Containers {
		spec.Containers[i].Name, spec.Containers[i].Image = fmt.Sprintf("c%d", i), pick(r, slimImages)
	}
	spec.ImagePullSecrets = nil
	for range r.IntN(3) {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: pick(r, slimPullSecrets)})
	}
	spec.ServiceAccountName = pick(r, slimAccounts)
}

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

// bigWorkloads is one workload of each kind with what real ones carry and
// fluxd does not read: kubectl's last-applied-configuration, managedFields,
// env, probes, resources, volumes, a selector, a CronJob's active Jobs.
func bigWorkloads() []runtime.Object {
	three := int32(3)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Namespace: "default", Name: name, Generation: 2,
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				"meta.helm.sh/release-name":         "web",
				corev1.LastAppliedConfigAnnotation:  `{"apiVersion":"apps/v1","kind":"Deployment","spec":{` + strings.Repeat(`"x":1,`, 200) + `}}`,
				"deployment.kubernetes.io/revision": "7",
				"fluxcd.io/automated":               "true",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{` + strings.Repeat(`"f:x":{},`, 100) + `"f:y":{}}}`)}}},
		}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	container := func(name, image string) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Command: []string{"/bin/web", "--listen=:8080"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}, PeriodSeconds: 5},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live"}}, PeriodSeconds: 5},
			VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}},
		Spec: corev1.PodSpec{
			InitContainers:     []corev1.Container{container("init", "r/init:1")},
			Containers:         []corev1.Container{container("web", "r/web:1.2.3")},
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull-1"}},
			ServiceAccountName: "builder", DeprecatedServiceAccount: "builder",
			Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		},
	}
	return []runtime.Object{
		&appsv1.Deployment{ObjectMeta: meta("web"),
			Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: selector, Template: *template.DeepCopy(),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-7c9f" has timed out progressing.`},
				}},
		},
		&appsv1.StatefulSet{ObjectMeta: meta("db"),
			Spec: appsv1.StatefulSetSpec{Replicas: &three, Selector: selector, Template: *template.DeepCopy(), ServiceName: "db",
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3,
				CurrentRevision: "db-5d8b", UpdateRevision: "db-6f9c"},
		},
		&appsv1.DaemonSet{ObjectMeta: meta("agent"),
			Spec:   appsv1.DaemonSetSpec{Selector: selector, Template: *template.DeepCopy()},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3},
		},
		&batchv1.CronJob{ObjectMeta: meta("report"),
			Spec:   batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *template.DeepCopy()}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Kind: "Job", Namespace: "default", Name: "report-29000000"}}},
		},
	}
}

func jsonSize(t *testing.T, o any) int {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
