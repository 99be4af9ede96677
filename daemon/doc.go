// Package daemon is fluxd's API: it implements the FluxService over the
// domain packages and serves it over gRPC. The gRPC edge stays thin: it
// authenticates the caller, checks its role, converts protobuf to domain
// types (convert.go) and maps domain errors to status codes (errors.go).
package daemon
