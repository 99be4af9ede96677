//go:build !linux

package auth

import "io/fs"

// stampOf is what fi says of the file: its size and modification time.
// Without a change time the stamp cannot tell a same-size rewrite with
// its mtime restored, so the store compares the file's content on every
// call (ctime 0: always racy); fluxd is built for Linux, where
// stamp_linux.go spares that.
func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
}
