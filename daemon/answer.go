package daemon

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Kept answers. A list-services answer depends on the view (rebuilt when
// the cluster, git or the automator changed), the caller's scope and the
// namespace asked for. For each of these fluxd keeps the services as the
// API sends them, and, on first use, their protobuf encoding (gRPC) and
// their JSON (the web page's JSON API), so that a call while nothing
// changed costs the interceptors and a copy of kept bytes. A new view
// drops them all; a scope is keyed by its content, so a tokens file that
// changes a scope keys its callers' answers anew.

// answerKey names a kept answer: the caller's scope as the tokens file
// writes it ("" for none) and the namespace asked for ("" for all).
type answerKey struct{ scope, namespace string }

// keptAnswer is one list-services answer of one view, without the git
// remote's state (which changes without the view: it is added to each
// answer). Callers that want an answer being made wait for it (ready)
// rather than each making their own: under load, every change of the
// view would otherwise have each of 50 callers convert and encode 1,000
// services.
type keptAnswer struct {
	ready  chan struct{} // closed once protos are set
	protos []*fluxdv1.Service
	// kept are the services' kept forms, protos their protobufs.
	kept []*keptService
	// pb is ListServicesResponse{Services: protos} encoded, json the
	// services as a JSON array; each made once, on first use.
	pbOnce, jsonOnce sync.Once
	pb, json         []byte
	jsonErr          error
	// asked says a caller got the answer (serviceProtos), and pbMade and
	// jsonMade that a caller was sent that form: the next view makes an
	// answer asked for, in the forms sent, before it is kept
	// (nextAnswers). An answer made that way and not asked for is not
	// made again by the view after.
	asked, pbMade, jsonMade atomic.Bool
	// scope and namespace are the callers' the answer is for.
	scope     *auth.Scope
	namespace string
}

func scopeKey(sc *auth.Scope) string {
	if sc == nil {
		return ""
	}
	return sc.String()
}

// listAnswer is the caller's list-services answer for namespace, kept
// while the view stays.
func (d *Daemon) listAnswer(ctx context.Context, namespace string) (*keptAnswer, error) {
	all, built, err := d.viewBuilt(ctx)
	if err != nil {
		return nil, err
	}
	sc := identity(ctx).Scope
	key := answerKey{scope: scopeKey(sc), namespace: namespace}
	var a *keptAnswer
	if built != 0 {
		d.view.mu.Lock()
		if d.view.answersOf < built {
			d.view.answers, d.view.byFirst, d.view.answersOf = map[answerKey]*keptAnswer{}, map[**fluxdv1.Service]*keptAnswer{}, built
		}
		if d.view.answersOf == built {
			if kept, ok := d.view.answers[key]; ok {
				d.view.mu.Unlock()
				select {
				case <-kept.ready:
					return kept, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if len(d.view.answers) < maxKeptNamespaces {
				// Made below, by this caller; others wait for it.
				a = &keptAnswer{ready: make(chan struct{})}
				d.view.answers[key] = a
			}
		}
		d.view.mu.Unlock()
	}
	if a == nil {
		a = &keptAnswer{ready: make(chan struct{})}
	}
	defer close(a.ready)
	a.scope, a.namespace = sc, namespace
	d.fill(a, all, built)
	out := a.protos
	if len(out) == 0 && namespace != "" {
		// Not kept: anyone may name any namespace, and keeping an entry
		// for each would grow memory without bound.
		d.view.mu.Lock()
		if d.view.answersOf == built && d.view.answers[key] == a {
			delete(d.view.answers, key)
		}
		d.view.mu.Unlock()
		return a, nil
	}
	if len(out) > 0 && built != 0 {
		d.view.mu.Lock()
		if d.view.answersOf == built && d.view.answers[key] == a {
			d.view.byFirst[&out[0]] = a
		}
		d.view.mu.Unlock()
	}
	return a, nil
}

// fill sets a's services: those of all in a's scope and namespace, in
// their kept forms for view built.
func (d *Daemon) fill(a *keptAnswer, all []Service, built uint64) {
	if a.scope != nil {
		all = inScope(a.scope, all)
	}
	n := len(all)
	if a.namespace != "" {
		n = 0
		for _, svc := range all {
			if svc.ID.Namespace == a.namespace {
				n++
			}
		}
	}
	out := make([]*fluxdv1.Service, 0, n)
	a.kept = make([]*keptService, 0, n)
	for _, svc := range all {
		if a.namespace == "" || svc.ID.Namespace == a.namespace {
			k := d.kept.of(built, svc)
			a.kept = append(a.kept, k)
			out = append(out, k.proto)
		}
	}
	a.protos = out
}

// nextAnswers makes, for a view about to be kept as view built, the
// answers the view before it was asked for (its scopes and namespaces,
// and the encodings its callers used), so that they are ready when the
// view is: under churn at 10,000 workloads, each new view had all of
// its callers wait while one of them made its answer (list-services
// p99 in BenchmarkScale). Called without the view's lock; buildView
// installs the answers with the view only if no other view was kept
// meanwhile.
func (d *Daemon) nextAnswers(svcs []Service, built uint64) (map[answerKey]*keptAnswer, map[**fluxdv1.Service]*keptAnswer) {
	d.view.mu.Lock()
	var before []*keptAnswer
	if d.view.answersOf == built-1 {
		for _, a := range d.view.answers {
			select {
			case <-a.ready:
				if len(a.protos) > 0 && a.asked.Load() {
					before = append(before, a)
				}
			default: // being made: its caller keeps it for the old view
			}
		}
	}
	d.view.mu.Unlock()
	if len(before) == 0 {
		return nil, nil
	}
	answers := make(map[answerKey]*keptAnswer, len(before))
	byFirst := make(map[**fluxdv1.Service]*keptAnswer, len(before))
	for _, old := range before {
		a := &keptAnswer{ready: make(chan struct{}), scope: old.scope, namespace: old.namespace}
		d.fill(a, svcs, built)
		close(a.ready)
		if len(a.protos) == 0 {
			continue
		}
		if old.pbMade.Load() {
			a.encoded()
		}
		if old.jsonMade.Load() {
			_, _ = a.servicesJSON()
		}
		answers[answerKey{scope: scopeKey(a.scope), namespace: a.namespace}] = a
		byFirst[&a.protos[0]] = a
	}
	return answers, byFirst
}

// keptFor returns the kept answer whose services services is, nil when
// services is not a kept answer's (a forwarded answer, an answer not kept).
func (d *Daemon) keptFor(services []*fluxdv1.Service) *keptAnswer {
	if len(services) == 0 {
		return nil
	}
	d.view.mu.Lock()
	defer d.view.mu.Unlock()
	a := d.view.byFirst[&services[0]]
	if a == nil || len(a.protos) != len(services) {
		return nil
	}
	return a
}

// encodedServices returns the encoding of a ListServicesResponse holding
// only services, when services is a kept answer's, encoding it on first
// use; nil otherwise.
func (d *Daemon) encodedServices(services []*fluxdv1.Service) []byte {
	a := d.keptFor(services)
	if a == nil {
		return nil
	}
	a.pbMade.Store(true)
	return a.encoded()
}

// encoded is the answer's ListServicesResponse encoding, made once.
func (a *keptAnswer) encoded() []byte {
	a.pbOnce.Do(func() { a.pb = encodedAnswer(a.kept) })
	return a.pb
}

// servicesJSON is the answer's services as a JSON array, made once.
func (a *keptAnswer) servicesJSON() ([]byte, error) {
	a.jsonOnce.Do(func() { a.json, a.jsonErr = jsonArray(a.kept) })
	return a.json, a.jsonErr
}

// answerSlot carries, in a ListServices call's context, the answer the
// handler made, to the interceptor that encodes it as JSON.
type answerSlot struct{ a *keptAnswer }

type answerSlotKey struct{}

// jsonOptions are the JSON API's (the web package's gateway marshals
// every other answer with the same options).
var jsonOptions = protojson.MarshalOptions{EmitUnpopulated: true}

// listServicesJSON is resp as the JSON API sends it, in parts to be sent
// one after the other, the services from the kept JSON when they are the
// answer a's (not copied).
func (d *Daemon) listServicesJSON(resp *fluxdv1.ListServicesResponse, a *keptAnswer) (jsonAnswer, error) {
	var services []byte
	if a != nil && len(a.protos) == len(resp.Services) && (len(a.protos) == 0 || &a.protos[0] == &resp.Services[0]) {
		a.jsonMade.Store(true)
		b, err := a.servicesJSON()
		if err != nil {
			return nil, err
		}
		services = b
	}
	if services == nil {
		b, err := servicesJSON(resp.Services)
		if err != nil {
			return nil, err
		}
		services = b
	}
	git := []byte("null")
	if resp.Git != nil {
		b, err := jsonOptions.Marshal(resp.Git)
		if err != nil {
			return nil, err
		}
		git = b
	}
	tail := make([]byte, 0, len(git)+len(`,"git":}`))
	tail = append(append(append(tail, `,"git":`...), git...), '}')
	return jsonAnswer{[]byte(`{"services":`), services, tail}, nil
}

// servicesJSON is services as a JSON array, each as protojson writes it:
// jsonArray's, for services that are not a kept answer's.
func servicesJSON(services []*fluxdv1.Service) ([]byte, error) {
	kept := make([]*keptService, len(services))
	for i, s := range services {
		kept[i] = &keptService{proto: s}
	}
	return jsonArray(kept)
}

// AnswerHeader asks, in a call's metadata, for ListServices' answer as
// the JSON API sends it (value "json"), and says so in the answer's
// header when it is. Only in-process calls (the web page's JSON API,
// Server.InProcess) are answered so: a network client always gets
// protobuf.
const AnswerHeader = "x-fluxd-answer"

// jsonAnswer is an answer already encoded as JSON, in parts: viewCodec
// sends them as they are, one after the other.
type jsonAnswer [][]byte

// wantsJSON says whether the call asks for a JSON answer and may have
// one (it comes through the in-process listener).
func wantsJSON(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(AnswerHeader); len(v) == 0 || v[0] != "json" {
		return false
	}
	p, ok := peer.FromContext(ctx)
	return ok && p.Addr != nil && p.Addr.Network() == "bufconn"
}

// withAnswerSlot gives a ListServices call that asks for JSON a slot for
// its handler's answer.
func withAnswerSlot(ctx context.Context, method string) context.Context {
	if method != fluxdv1.FluxService_ListServices_FullMethodName || !wantsJSON(ctx) {
		return ctx
	}
	return context.WithValue(ctx, answerSlotKey{}, &answerSlot{})
}

// keepAnswer hands the handler's answer to asJSON, when the call wants it.
func keepAnswer(ctx context.Context, a *keptAnswer) {
	if slot, ok := ctx.Value(answerSlotKey{}).(*answerSlot); ok {
		slot.a = a
	}
}

// asJSON turns a ListServices answer into its JSON when the caller asked
// for it.
func (s *Server) asJSON(ctx context.Context, resp any) (any, error) {
	r, ok := resp.(*fluxdv1.ListServicesResponse)
	if !ok || !wantsJSON(ctx) {
		return resp, nil
	}
	var a *keptAnswer
	if slot, ok := ctx.Value(answerSlotKey{}).(*answerSlot); ok {
		a = slot.a
	}
	b, err := s.d.listServicesJSON(r, a)
	if err != nil {
		return resp, nil // the gateway's way, in protobuf
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(AnswerHeader, "json"))
	return b, nil
}
