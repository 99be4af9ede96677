// Package fluxerr is the error type that reaches a person: it carries a
// kind, which the gRPC edge maps to a status code, and a help text saying
// what happened, the likely causes and what to try.
package fluxerr
