package daemon

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// toStatus maps a domain error to a gRPC status with a deliberate code.
// The message carries the error's help text, so that fluxctl can show it.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
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
	}
	return codes.Internal
}
