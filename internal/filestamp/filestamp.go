// Package filestamp says when a file last changed, as stat tells it, for
// the files fluxd reloads when they change (the tokens file, TLS keys and
// CAs).
package filestamp

import "io/fs"

// Stamp is what stat says of a file's identity and last change. When two
// stamps of a path differ, the file changed; when they are equal it may
// still have, within one tick of the filesystem's clock (see Ctime).
type Stamp struct {
	Dev, Ino uint64
	// Ctime and Mtime are in nanoseconds since 1970; Ctime is 0 where
	// stat does not tell it (then only Mtime and Size say, and a same-size
	// rewrite with its mtime put back, cp -p or touch -r, is missed).
	Ctime, Mtime int64
	Size         int64
}

// Of is fi's stamp. On Linux it includes the device, the inode and the
// change time, which no user can set: a rename brings another inode, and
// any write, chmod or utimes moves the ctime.
func Of(fi fs.FileInfo) Stamp {
	st := Stamp{Mtime: fi.ModTime().UnixNano(), Size: fi.Size()}
	changeOf(fi, &st)
	return st
}
