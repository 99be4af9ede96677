// Command etcd is a thin wrapper around etcd's own main, so that etcd can be
// built from the Go module proxy: `go install go.etcd.io/etcd/server/v3@v3.6.6`
// is refused because that module's go.mod carries replace directives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
