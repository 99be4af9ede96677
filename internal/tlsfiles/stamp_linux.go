package tlsfiles

import (
	"fmt"
	"io/fs"
	"syscall"
)

// changeStamp is the file's device, inode and change time.
func changeStamp(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d", st.Dev, st.Ino, st.Ctim.Nano())
	}
	return ""
}
