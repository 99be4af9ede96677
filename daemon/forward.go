package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/grpcwindow"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Leadership says whether this replica leads, and where the leader is.
type Leadership interface {
	IsLeader() bool
	LeaderAddr() string
}

// forwardedHeader marks a call a follower forwarded, so that it is never
// forwarded twice (two replicas that each believe the other leads).
const forwardedHeader = "x-fluxd-forwarded-by"

// leaderOnly are the methods only the leader serves: everything that
// mutates or runs jobs, and the job reads (live progress is the
// leader's). Followers serve the other reads (services, images, history)
// themselves.
var leaderOnly = map[string]bool{
	fluxdv1.FluxService_Release_FullMethodName:     true,
	fluxdv1.FluxService_GetJob_FullMethodName:      true,
	fluxdv1.FluxService_WatchJob_FullMethodName:    true,
	fluxdv1.FluxService_CancelJob_FullMethodName:   true,
	fluxdv1.FluxService_ListJobs_FullMethodName:    true,
	fluxdv1.FluxService_GetJobLog_FullMethodName:   true,
	fluxdv1.FluxService_Automate_FullMethodName:    true,
	fluxdv1.FluxService_Deautomate_FullMethodName:  true,
	fluxdv1.FluxService_Lock_FullMethodName:        true,
	fluxdv1.FluxService_Unlock_FullMethodName:      true,
	fluxdv1.FluxService_SetPolicy_FullMethodName:   true,
	fluxdv1.FluxService_NotifyImage_FullMethodName: true,
	fluxdv1.FluxService_Sync_FullMethodName:        true, // the leader syncs
	// The leader runs the promotion loop and the release queue: a
	// promotion's job is its, and an approval or a resume is acted on
	// at once.
	fluxdv1.FluxService_Promote_FullMethodName:     true,
	fluxdv1.FluxService_Approve_FullMethodName:     true,
	fluxdv1.FluxService_ResumeStage_FullMethodName: true,
}

// leaderFirst are reads a follower asks the leader for, because only the
// leader knows part of the answer (automation states), and serves itself
// when the leader cannot be reached.
var leaderFirst = map[string]bool{
	fluxdv1.FluxService_ListServices_FullMethodName: true,
}

// forwarder relays a follower's leader-only calls to the leader, with the
// caller's own token: the leader authenticates it again.
type forwarder struct {
	self       string
	leadership Leadership
	// peer verifies the leader's certificate; nil: no forwarding.
	peer *tls.Config

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// target returns the leader's connection, or nil when this replica leads.
func (f *forwarder) target(ctx context.Context, method string) (*grpc.ClientConn, error) {
	if f == nil || f.leadership == nil || !(leaderOnly[method] || leaderFirst[method]) || f.leadership.IsLeader() {
		return nil, nil
	}
	if leaderFirst[method] {
		md, _ := metadata.FromIncomingContext(ctx)
		if f.peer == nil || f.leadership.LeaderAddr() == "" || len(md.Get(forwardedHeader)) > 0 {
			return nil, nil
		}
	}
	addr := f.leadership.LeaderAddr()
	md, _ := metadata.FromIncomingContext(ctx)
	if addr == "" || len(md.Get(forwardedHeader)) > 0 {
		return nil, status.Error(codes.Unavailable, "no fluxd replica leads just now (an election is under way), and only the leader runs releases and policy changes.\n\n"+
			"Try again in a few seconds; the new leader takes over within the lease duration.")
	}
	if f.peer == nil {
		return nil, fluxerr.New(fluxerr.Precondition, fmt.Errorf("this fluxd replica follows the leader at %s, and does not forward calls to it without replica TLS", addr),
			"A forwarded call carries your token, and the leader's address comes from a Lease that others may be able to write, so fluxd forwards only to a leader whose certificate it can verify. "+
				"Call the leader at "+addr+" directly, or give the replicas --tls-cert-file, --tls-key-file and --replica-ca-file (see docs/replicas.md).")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	// Verified against the replica CA, whatever address the Lease names.
	c, err := grpc.NewClient("passthrough:///"+addr, append(grpcwindow.DialOptions(),
		grpc.WithTransportCredentials(credentials.NewTLS(f.peer.Clone())),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxAnswerBytes)))...)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "cannot reach the leader at %s: %v", addr, err)
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	out := metadata.Pairs(forwardedHeader, f.self)
	for _, k := range []string{"authorization", "x-request-id"} {
		if v := md.Get(k); len(v) > 0 {
			out.Set(k, v...)
		}
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// message returns an empty request (in) or response message of a method
// of the API, found in the registered descriptors.
func message(method string, in bool) (proto.Message, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, errors.New("bad method " + method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, errors.New(svc + " is not a service")
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, errors.New("no method " + method)
	}
	msg := md.Output()
	if in {
		msg = md.Input()
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(msg.FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

func (f *forwarder) unary(ctx context.Context, conn *grpc.ClientConn, method string, req any) (any, error) {
	reply, err := message(method, false)
	if err != nil {
		return nil, err
	}
	if err := conn.Invoke(f.outgoing(ctx), method, req, reply); err != nil {
		return nil, leaderError(err)
	}
	return reply, nil
}

// stream relays a server-streaming call (WatchJob): one request, then
// every response until the leader ends the stream.
func (f *forwarder) stream(ss grpc.ServerStream, conn *grpc.ClientConn, method string) error {
	ctx := ss.Context()
	in, err := message(method, true)
	if err != nil {
		return err
	}
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	cs, err := conn.NewStream(f.outgoing(ctx), &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return leaderError(err)
	}
	if err := cs.SendMsg(in); err != nil {
		return leaderError(err)
	}
	if err := cs.CloseSend(); err != nil {
		return leaderError(err)
	}
	for {
		out, err := message(method, false)
		if err != nil {
			return err
		}
		if err := cs.RecvMsg(out); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return leaderError(err)
		}
		if err := ss.SendMsg(out); err != nil {
			return err
		}
	}
}

// leaderError passes the leader's answer through; a leader that cannot be
// reached is Unavailable with advice.
func leaderError(err error) error {
	if status.Code(err) == codes.Unavailable {
		return status.Errorf(codes.Unavailable, "this fluxd follows another replica, and the leader cannot be reached: %s\n\n"+
			"If the leader died, another replica takes over within the lease duration; try again then.", status.Convert(err).Message())
	}
	return err
}

func (f *forwarder) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
}
