// The Gateway API CRDs only (no binary): this module pins the gateway-api release whose config/crd YAMLs
// scripts/build-neighbours copies from the Go module cache (docs/real-cluster.md).
module aiplane.local/controlplane/neighbours/gateway-api

go 1.26.0

require sigs.k8s.io/gateway-api v1.6.3
