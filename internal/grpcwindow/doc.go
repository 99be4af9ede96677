// Package grpcwindow holds the HTTP/2 flow-control windows and read
// buffer of fluxd's own gRPC clients (fluxctl, the web page's in-process
// connection, a follower's connection to the leader), which fetch large
// answers: list-services at 10,000 workloads is about 2 MB, list-images
// --all more.
//
// gRPC starts every connection with 64 KiB windows and grows them by
// estimating the bandwidth-delay product (BDP) from pings as data
// arrives. fluxctl opens a new connection per command, so each of its
// calls began at 64 KiB: the server sent 64 KiB, then waited a round trip
// for a window update, and so on while the estimate grew; a few-MB answer
// spent most of its time stalled on flow control. With DialOptions the
// client advertises windows that hold a whole list-services answer from
// the first byte, and gRPC stops estimating (the windows are static).
//
// Only clients need them, and fluxd's gRPC server keeps gRPC's defaults
// on purpose. In HTTP/2 the receiver's windows bound what the sender may
// send, and the server receives small requests: its windows do not speed
// up an answer (BenchmarkLargeAnswer: a server with these windows and no
// client options answered as slowly as with none). Its read buffer would
// cost memory for nothing: gRPC holds a connection's read buffer for the
// connection's life unless the connection is a bare TCP one, and the
// daemon wraps its connections (limitListener, TLS), so 256 KiB at each of
// daemon.DefaultMaxConnections (1,024) would pin 256 MiB, beside a heap
// that fluxd keeps under 300 MB.
package grpcwindow
