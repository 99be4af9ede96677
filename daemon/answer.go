package daemon

import (
	"bytes"
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

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
// answer).
type keptAnswer struct {
	protos []*fluxdv1.Service
	// pb is ListServicesResponse{Services: protos} encoded, json the
	// services as a JSON array; each made on first use, under the view's
	// lock.
	pb, json []byte
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
	if built != 0 {
		d.view.mu.Lock()
		a, ok := d.view.answers[key]
		if ok && d.view.answersOf == built {
			d.view.mu.Unlock()
			return a, nil
		}
		d.view.mu.Unlock()
	}
	if sc != nil {
		all = inScope(sc, all)
	}
	n := len(all)
	if namespace != "" {
		n = 0
		for _, svc := range all {
			if svc.ID.Namespace == namespace {
				n++
			}
		}
		if n == 0 {
			// Not kept: anyone may name any namespace, and keeping an
			// entry for each would grow memory without bound.
			return &keptAnswer{protos: []*fluxdv1.Service{}}, nil
		}
	}
	out := make([]*fluxdv1.Service, 0, n)
	for _, svc := range all {
		if namespace == "" || svc.ID.Namespace == namespace {
			out = append(out, serviceToProto(svc))
		}
	}
	a := &keptAnswer{protos: out}
	if built != 0 {
		d.view.mu.Lock()
		if d.view.built == built {
			if d.view.answersOf != built {
				d.view.answers, d.view.byFirst, d.view.answersOf = map[answerKey]*keptAnswer{}, map[*fluxdv1.Service]*keptAnswer{}, built
			}
			if len(d.view.answers) < maxKeptNamespaces {
				d.view.answers[key] = a
				if len(out) > 0 {
					d.view.byFirst[out[0]] = a
				}
			}
		}
		d.view.mu.Unlock()
	}
	return a, nil
}

// keptFor returns the kept answer whose services services is, nil when
// services is not a kept answer's (a forwarded answer, an answer not kept).
func (d *Daemon) keptFor(services []*fluxdv1.Service) *keptAnswer {
	if len(services) == 0 {
		return nil
	}
	d.view.mu.Lock()
	defer d.view.mu.Unlock()
	a := d.view.byFirst[services[0]]
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
	d.view.mu.Lock()
	defer d.view.mu.Unlock()
	if a.pb == nil {
		b, err := proto.Marshal(&fluxdv1.ListServicesResponse{Services: a.protos})
		if err != nil {
			return nil
		}
		a.pb = b
	}
	return a.pb
}

// jsonOptions are the JSON API's (the web package's gateway marshals
// every other answer with the same options).
var jsonOptions = protojson.MarshalOptions{EmitUnpopulated: true}

// listServicesJSON is resp as the JSON API sends it, from the kept JSON
// of its services when they are a kept answer's.
func (d *Daemon) listServicesJSON(resp *fluxdv1.ListServicesResponse) ([]byte, error) {
	var services []byte
	if a := d.keptFor(resp.Services); a != nil {
		d.view.mu.Lock()
		if a.json == nil {
			a.json, _ = servicesJSON(a.protos)
		}
		services = a.json
		d.view.mu.Unlock()
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
	var buf bytes.Buffer
	buf.Grow(len(services) + len(git) + 24)
	buf.WriteString(`{"services":`)
	buf.Write(services)
	buf.WriteString(`,"git":`)
	buf.Write(git)
	buf.WriteString("}")
	return buf.Bytes(), nil
}

// servicesJSON is services as a JSON array, each as protojson writes it.
func servicesJSON(services []*fluxdv1.Service) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, s := range services {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := jsonOptions.Marshal(s)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// AnswerHeader asks, in a call's metadata, for ListServices' answer as
// the JSON API sends it (value "json"), and says so in the answer's
// header when it is. Only in-process calls (the web page's JSON API,
// Server.InProcess) are answered so: a network client always gets
// protobuf.
const AnswerHeader = "x-fluxd-answer"

// jsonAnswer is an answer already encoded as JSON: viewCodec sends it as
// it is.
type jsonAnswer []byte

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

// asJSON turns a ListServices answer into its JSON when the caller asked
// for it.
func (s *Server) asJSON(ctx context.Context, resp any) (any, error) {
	r, ok := resp.(*fluxdv1.ListServicesResponse)
	if !ok || !wantsJSON(ctx) {
		return resp, nil
	}
	b, err := s.d.listServicesJSON(r)
	if err != nil {
		return resp, nil // the gateway's way, in protobuf
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(AnswerHeader, "json"))
	return jsonAnswer(b), nil
}
