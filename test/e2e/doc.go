// Package e2e drives the built kubectl-gobrave binary, through the real kubectl's plugin discovery,
// against a real control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// from hack/testbin.sh, with kwok's fake nodes, started once per run by hack/cluster-up.sh.
//
// GOBRAVE_E2E=1 (CI and `make test`) makes a cluster that cannot start a failure; without it the
// suite skips when the control-plane binaries have not been built. See docs/testing.md.
package e2e
