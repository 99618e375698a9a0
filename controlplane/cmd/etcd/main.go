// Command etcd is the etcd server (go.etcd.io/etcd/server/v3's etcdmain, as the root main.go of the etcd
// repository calls it), at the version k8s.io/kubernetes's own go.mod selects.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
