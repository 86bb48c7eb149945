// etcd for the cluster tests: `go install go.etcd.io/etcd/server/v3@version` is refused
// (its go.mod has replace lines), so this wrapper module builds the server's own main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
