package grpcwindow

import "google.golang.org/grpc"

// The sizes, chosen for list-services at 10,000 workloads (about 2 MB).
// They also bound what one client connection may hold in memory: the
// server may send up to ConnWindow (StreamWindow on one call) that gRPC
// has received but not yet decoded, and the connection keeps a read
// buffer of ReadBuffer. fluxd's clients hold one connection each, so that
// is at most about 8.25 MiB a client, on top of the answer being decoded
// (up to daemon.MaxAnswerBytes, whatever the windows).
const (
	// StreamWindow holds a whole list-services answer at 10,000
	// workloads, so one call never waits for a window update.
	StreamWindow = 4 << 20
	// ConnWindow lets two such answers flow at once on one connection:
	// the web page's in-process connection carries concurrent calls.
	ConnWindow = 8 << 20
	// ReadBuffer is how much a connection reads from its socket at once:
	// 8 reads for a 2 MB answer where gRPC's 32 KiB took 64. It matches
	// the server's write buffer (daemon's writeBufferSize).
	ReadBuffer = 256 << 10
)

// DialOptions returns the options for a client of fluxd's API: windows of
// StreamWindow and ConnWindow from the connection's first byte (which
// turns off gRPC's BDP estimation, whose windows start at 64 KiB), and a
// read buffer of ReadBuffer.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(StreamWindow),
		grpc.WithInitialConnWindowSize(ConnWindow),
		grpc.WithReadBufferSize(ReadBuffer),
	}
}
