// Command etcd runs the etcd server pinned by k8s.io/kubernetes, for the
// handoff end-to-end test control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
