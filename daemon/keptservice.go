package daemon

import (
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
)

// Kept services. A view is rebuilt whole when anything in it changed
// (viewlag.go bounds how often, under churn), but between two views most
// services are the same: at 10,000 workloads, a rollout changes a few.
// Converting every service to protobuf and encoding it again at each
// view cost as much as joining the view, and made most of the garbage the
// view left (BenchmarkScale: the answers of old views held by slow calls).
// So each service's protobuf, its encoding and its JSON are kept, and a
// new view reuses them for every service equal, field by field, to the
// one they were made from (sameService). An answer is then its services'
// kept encodings laid one after the other: a repeated field's encoding is
// the concatenation of its elements'.

// keptService is one service's answer forms, made from svc.
type keptService struct {
	svc   Service
	proto *fluxdv1.Service
	// pb is the Service message encoded, json as protojson writes it
	// (jsonOptions); each made once, on first use.
	pbOnce, jsonOnce sync.Once
	pb, json         []byte
	jsonErr          error
}

func (k *keptService) encoded() []byte {
	k.pbOnce.Do(func() { k.pb, _ = proto.Marshal(k.proto) })
	return k.pb
}

func (k *keptService) jsonForm() ([]byte, error) {
	k.jsonOnce.Do(func() { k.json, k.jsonErr = jsonOptions.Marshal(k.proto) })
	return k.json, k.jsonErr
}

// keptServices keeps the services of the last two views: cur for the
// view answersOf counts, prev for the one before (a new view looks there
// first). A service of neither is converted afresh.
type keptServices struct {
	mu        sync.Mutex
	view      uint64
	cur, prev map[platform.ID]*keptService
}

// of returns svc's kept forms for view built (0: a view not kept, whose
// services are converted and not kept).
func (ks *keptServices) of(built uint64, svc Service) *keptService {
	if built == 0 {
		return &keptService{svc: svc, proto: serviceToProto(svc)}
	}
	ks.mu.Lock()
	if built > ks.view {
		ks.view, ks.prev, ks.cur = built, ks.cur, make(map[platform.ID]*keptService, len(ks.cur))
	}
	k := ks.cur[svc.ID]
	if k == nil {
		k = ks.prev[svc.ID]
	}
	ks.mu.Unlock()
	if k == nil || !sameService(k.svc, svc) {
		// Kept without its definition, which would keep the manifests
		// it was read from.
		svc.def = nil
		k = &keptService{svc: svc, proto: serviceToProto(svc)}
	}
	ks.mu.Lock()
	if built == ks.view {
		ks.cur[svc.ID] = k
	}
	ks.mu.Unlock()
	return k
}

// sameService says a and b convert to the same answer: equal in every
// field serviceToProto reads. TestSameServiceCoversEveryField keeps the
// list whole.
func sameService(a, b Service) bool {
	return a.ID == b.ID && a.Status == b.Status && a.Replicas == b.Replicas &&
		a.InGit == b.InGit && a.InCluster == b.InCluster && a.Automated == b.Automated &&
		a.Locked == b.Locked && a.LockMsg == b.LockMsg && a.TagOrder == b.TagOrder &&
		a.Prerelease == b.Prerelease && a.SyncState == b.SyncState && a.SyncDetail == b.SyncDetail &&
		slices.Equal(a.Containers, b.Containers) && slices.Equal(a.Warnings, b.Warnings) &&
		maps.Equal(a.Filters, b.Filters) && maps.Equal(a.Goals, b.Goals) && maps.Equal(a.GitImages, b.GitImages) &&
		sameAutomation(a.Automation, b.Automation) &&
		a.annotations[release.AnnotationLockedBy] == b.annotations[release.AnnotationLockedBy] &&
		a.annotations[release.AnnotationLockedAt] == b.annotations[release.AnnotationLockedAt]
}

func sameAutomation(a, b *automator.Status) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.State == b.State && a.Next.Equal(b.Next) && a.JobID == b.JobID && a.LastError == b.LastError &&
		a.Failures == b.Failures && a.Decision == b.Decision && a.LastCheck.Equal(b.LastCheck) &&
		slices.Equal(a.Warnings, b.Warnings)
}

// encodedAnswer is ListServicesResponse{Services: the services of kept}
// encoded, from each service's kept encoding.
func encodedAnswer(kept []*keptService) []byte {
	n := 0
	for _, k := range kept {
		b := k.encoded()
		n += protowire.SizeTag(listServicesField) + protowire.SizeBytes(len(b))
	}
	out := make([]byte, 0, n)
	for _, k := range kept {
		out = protowire.AppendTag(out, listServicesField, protowire.BytesType)
		out = protowire.AppendBytes(out, k.encoded())
	}
	return out
}

// listServicesField is ListServicesResponse.services' field number.
var listServicesField = (&fluxdv1.ListServicesResponse{}).ProtoReflect().Descriptor().Fields().ByName("services").Number()

// jsonArray is the services of kept as a JSON array, from each service's
// kept JSON.
func jsonArray(kept []*keptService) ([]byte, error) {
	n := 2
	for _, k := range kept {
		b, err := k.jsonForm()
		if err != nil {
			return nil, err
		}
		n += len(b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, k := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, k.json...)
	}
	return append(out, ']'), nil
}
