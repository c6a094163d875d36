package cmd

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	batchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// clientset is the plugin's kubernetes.Interface: the typed clients of the
// API groups the plugin calls (core/v1, apps/v1, batch/v1,
// authorization/v1) and discovery (the embedded Clientset's), on one HTTP
// client and one rate limiter, as
// kubernetes.NewForConfig makes them. kubernetes.NewForConfig also makes a
// client for each of the ~60 other group versions, and running their
// constructors faults in (64 KiB at a time, the kernel's fault-around) the
// text of as many packages: 1.5 MiB of resident text at every recover
// (hack/recmem -pagemap, N = 1,000, the same each run). The other groups'
// accessors, from the embedded zero Clientset, return nil clients;
// TestClientsetServesTheGroupsThePluginCalls fails when the plugin's code
// calls one of them.
type clientset struct {
	*kubernetes.Clientset // zero: the groups the plugin does not call
	core                  *corev1.CoreV1Client
	apps                  *appsv1.AppsV1Client
	batch                 *batchv1.BatchV1Client
	authz                 *authorizationv1.AuthorizationV1Client
}

// newClientset makes the plugin's clients of rc, sharing one HTTP client
// (client-go's cached transport for rc, as kubernetes.NewForConfig does).
func newClientset(rc *rest.Config) (*clientset, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	// One rate limiter for every group, as kubernetes.NewForConfigAndClient.
	shallow := *rc
	rc = &shallow
	if rc.RateLimiter == nil && rc.QPS > 0 {
		if rc.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(rc.QPS, rc.Burst)
	}
	c := &clientset{Clientset: &kubernetes.Clientset{}}
	if c.core, err = corev1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, err
	}
	if c.apps, err = appsv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, err
	}
	if c.batch, err = batchv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, err
	}
	if c.authz, err = authorizationv1.NewForConfigAndClient(rc, hc); err != nil {
		return nil, err
	}
	if c.DiscoveryClient, err = discovery.NewDiscoveryClientForConfigAndClient(rc, hc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *clientset) CoreV1() corev1.CoreV1Interface                            { return c.core }
func (c *clientset) AppsV1() appsv1.AppsV1Interface                            { return c.apps }
func (c *clientset) BatchV1() batchv1.BatchV1Interface                         { return c.batch }
func (c *clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return c.authz }
