package web

import (
	"io"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// answerHeader asks the gRPC server, in process, for ListServices' answer
// as JSON: fluxd keeps it encoded so while nothing changed (daemon's
// AnswerHeader, answer.go). The call passes the same interceptors (token,
// role, scope, forwarding to the leader) as any other; only the
// gateway's decoding of protobuf and encoding of JSON, per call, is left
// out.
const answerHeader = "x-fluxd-answer"

// listServices serves ListServices from the server's kept JSON.
func (h *Handler) listServices(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "the request is too large: at most 1 MiB")
		return
	}
	var req fluxdv1.ListServicesRequest
	if len(body) > 0 {
		if err := h.jsonpb.Unmarshal(body, &req); err != nil {
			runtime.HTTPError(ctx, h.gw, h.jsonpb, w, r, status.Errorf(codes.InvalidArgument, "%v", err))
			return
		}
	}
	var out rawAnswer
	defer out.Free()
	var header metadata.MD
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token, answerHeader, "json")
	err = h.cfg.Conn.Invoke(ctx, fluxdv1.FluxService_ListServices_FullMethodName, &req, &out,
		grpc.ForceCodecV2(rawAnswerCodec{encoding.GetCodecV2(grpcproto.Name)}), grpc.Header(&header))
	if err != nil {
		runtime.HTTPError(ctx, h.gw, h.jsonpb, w, r, err)
		return
	}
	w.Header().Set("Content-Type", h.jsonpb.ContentType(nil))
	if v := header.Get(answerHeader); len(v) == 0 || v[0] != "json" {
		// Answered in protobuf (a server that does not keep JSON): the
		// gateway's way.
		var resp fluxdv1.ListServicesResponse
		if err := proto.Unmarshal(out.Materialize(), &resp); err != nil {
			runtime.HTTPError(ctx, h.gw, h.jsonpb, w, r, err)
			return
		}
		b, err := marshal.Marshal(&resp)
		if err != nil {
			runtime.HTTPError(ctx, h.gw, h.jsonpb, w, r, err)
			return
		}
		_, _ = w.Write(b)
		return
	}
	// The answer's buffers as they came, not copied into one.
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	for _, buf := range out.BufferSlice {
		if _, err := w.Write(buf.ReadOnlyData()); err != nil {
			return
		}
	}
}

// rawAnswer is an answer's buffers, as the server sent them, held until
// Free.
type rawAnswer struct{ mem.BufferSlice }

// rawAnswerCodec encodes requests as gRPC's protobuf codec does and keeps
// answers as they came.
type rawAnswerCodec struct{ encoding.CodecV2 }

func (c rawAnswerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if out, ok := v.(*rawAnswer); ok {
		data.Ref()
		out.BufferSlice = data
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}
