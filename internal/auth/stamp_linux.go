package auth

import (
	"io/fs"
	"syscall"
)

// stampOf is what fi says of the file's identity and last change. On
// Linux it includes the device, the inode and the change time (ctime),
// which no user can set: a rename brings another inode, and any write,
// chmod or utimes (touch -r, cp -p) moves the ctime.
func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), sys.Ino
		st.ctime = sys.Ctim.Nano()
	}
	return st
}
