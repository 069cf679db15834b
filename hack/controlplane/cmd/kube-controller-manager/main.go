// Command kube-controller-manager runs the Kubernetes controller manager
// built from k8s.io/kubernetes, for the handoff end-to-end test control plane.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
