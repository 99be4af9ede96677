package history

import "fmt"

// CheckSchema says whether a database opened without migrating (the
// source of 'fluxd db copy') is at the schema version this fluxd writes:
// have is its version (0: it holds no fluxd schema), want the newest.
func CheckSchema(where string, have, want int64) error {
	switch {
	case have == 0:
		return fmt.Errorf("%s holds no fluxd history (no fluxd migration table): is it the right database?", where)
	case have < want:
		return fmt.Errorf("%s is at schema version %d and this fluxd writes version %d: upgrade it first by starting this fluxd once with --history-db pointing at it (fluxd migrates at start), then copy again; it was left as it is", where, have, want)
	case have > want:
		return fmt.Errorf("%s is at schema version %d, newer than this fluxd's %d: copy it with the fluxd that wrote it", where, have, want)
	}
	return nil
}
