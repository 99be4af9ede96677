package daemon

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// ErrorDomain names fluxd's errors in their ErrorInfo details.
const ErrorDomain = "fluxd.io"

// toStatus maps a domain error to a gRPC status with a deliberate code.
// A *fluxerr.Error travels as its message plus an ErrorInfo detail whose
// reason is its kind and whose "help" metadata is its help text, so that
// any client can show what to try; fluxctl prints both as one block.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	// Every error fluxd answers carries an ErrorInfo of its domain, help
	// or not: a client tells by it that fluxd answered (fluxd's own
	// request to a registry may have failed), not that the client's
	// connection to fluxd did.
	var fe *fluxerr.Error
	msg, kind, md := err.Error(), fluxerr.Server, map[string]string{}
	if errors.As(err, &fe) {
		kind = fe.Kind
		if fe.Help != "" {
			// The message is the whole chain up to the help text.
			msg = strings.TrimSuffix(msg, "\n\n"+strings.TrimSpace(fe.Help))
			md["help"] = strings.TrimSpace(fe.Help)
		}
	}
	st := status.New(codeOf(err), msg)
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   kindName(kind),
		Domain:   ErrorDomain,
		Metadata: md,
	}); derr == nil {
		st = withInfo
	}
	return st.Err()
}

func kindName(k fluxerr.Kind) string {
	switch k {
	case fluxerr.User:
		return "USER"
	case fluxerr.Missing:
		return "MISSING"
	case fluxerr.Precondition:
		return "PRECONDITION"
	case fluxerr.Unimplemented:
		return "UNIMPLEMENTED"
	case fluxerr.Unavailable:
		return "UNAVAILABLE"
	case fluxerr.Forbidden:
		return "FORBIDDEN"
	}
	return "SERVER"
}

func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, platform.ErrNotFound):
		return codes.NotFound
	}
	switch fluxerr.KindOf(err) {
	case fluxerr.User:
		return codes.InvalidArgument
	case fluxerr.Missing:
		return codes.NotFound
	case fluxerr.Precondition:
		return codes.FailedPrecondition
	case fluxerr.Unimplemented:
		return codes.Unimplemented
	case fluxerr.Unavailable:
		return codes.Unavailable
	case fluxerr.Forbidden:
		return codes.PermissionDenied
	}
	return codes.Internal
}
