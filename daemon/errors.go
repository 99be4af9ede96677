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
	var fe *fluxerr.Error
	if !errors.As(err, &fe) || fe.Help == "" {
		return status.Error(codeOf(err), err.Error())
	}
	// The message is the whole chain up to the help text.
	msg := strings.TrimSuffix(err.Error(), "\n\n"+strings.TrimSpace(fe.Help))
	st := status.New(codeOf(err), msg)
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   kindName(fe.Kind),
		Domain:   ErrorDomain,
		Metadata: map[string]string{"help": strings.TrimSpace(fe.Help)},
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
