// Command kube-apiserver is upstream's cmd/kube-apiserver (k8s.io/kubernetes at the version go.mod requires): the
// same imports and the same command constructor, built here from the published module.
package main

import (
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"os"
	_ "time/tzdata" // CronJob time zones
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
