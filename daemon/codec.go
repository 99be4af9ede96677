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
// An answer the interceptors turned into JSON (jsonAnswer: the web page's
// JSON API, in process) is sent as it is.
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
	if parts, ok := v.(jsonAnswer); ok {
		out := make(mem.BufferSlice, 0, len(parts))
		for _, p := range parts {
			out = append(out, mem.SliceBuffer(p))
		}
		return out, nil
	}
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
