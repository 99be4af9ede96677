package daemon

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// viewCodec is gRPC's protobuf codec, except for list-services answers
// whose services are the kept view's: those are encoded once per view and
// namespace, and each answer sends those bytes followed by its own other
// fields (the git remote's state). Encoding 1,000 services is most of what
// a list-services call costs fluxd once the view is kept (about 0.4 ms of
// the 0.6 ms of CPU measured by BenchmarkListServices/kept); dashboards and
// scripts call it often, and nothing in it changes between views.
//
// Protobuf allows a message's fields in any order and concatenated
// encodings merge, so the two parts decode as one message.
type viewCodec struct {
	encoding.CodecV2
	d *Daemon
}

func newViewCodec(d *Daemon) viewCodec {
	return viewCodec{CodecV2: encoding.GetCodecV2(grpcproto.Name), d: d}
}

// Marshal encodes v, reusing the kept encoding of a view's services.
func (c viewCodec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*fluxdv1.ListServicesResponse)
	if !ok || len(resp.Services) == 0 {
		return c.CodecV2.Marshal(v)
	}
	services := c.d.encodedServices(resp.Services)
	if services == nil {
		return c.CodecV2.Marshal(v)
	}
	rest, err := proto.Marshal(&fluxdv1.ListServicesResponse{Git: resp.Git})
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(services), mem.SliceBuffer(rest)}, nil
}

// encodedServices returns the encoding of a ListServicesResponse holding
// only services, when services is a namespace's slice of the kept view,
// encoding it on first use; nil otherwise.
func (d *Daemon) encodedServices(services []*fluxdv1.Service) []byte {
	d.view.mu.Lock()
	defer d.view.mu.Unlock()
	for ns, kept := range d.view.protos {
		if len(kept) == 0 || len(kept) != len(services) || &kept[0] != &services[0] {
			continue
		}
		if b, ok := d.view.encoded[ns]; ok {
			return b
		}
		b, err := proto.Marshal(&fluxdv1.ListServicesResponse{Services: kept})
		if err != nil {
			return nil
		}
		if d.view.encoded == nil {
			d.view.encoded = map[string][]byte{}
		}
		d.view.encoded[ns] = b
		return b
	}
	return nil
}
