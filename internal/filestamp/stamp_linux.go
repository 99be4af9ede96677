package filestamp

import (
	"io/fs"
	"syscall"
)

func changeOf(fi fs.FileInfo, st *Stamp) {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.Dev, st.Ino = uint64(sys.Dev), sys.Ino
		st.Ctime = sys.Ctim.Nano()
	}
}
