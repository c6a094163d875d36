package cmd

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestClientsetServesTheGroupsThePluginCalls: every API group accessor
// (CoreV1(), AppsV1(), ...) that the plugin's code calls returns a client
// from the plugin's clientset, which makes only the clients of the groups
// the plugin uses; a call of another group's would get a nil client. The
// code read is the module's non-test Go source; so are the groups' rate
// limiter and HTTP client shared, as kubernetes.NewForConfig shares them.
func TestClientsetServesTheGroupsThePluginCalls(t *testing.T) {
	c, err := newClientset(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`\.([A-Z][A-Za-z]*V[0-9]+(?:alpha[0-9]+|beta[0-9]+)?)\(\)`)
	called := map[string]string{}
	for _, dir := range []string{"../../pkg", "../../cmd", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range call.FindAllStringSubmatch(string(b), -1) {
				called[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(called) < 3 {
		t.Fatalf("found only %v: the source was not read", called)
	}
	v := reflect.ValueOf(c)
	for name, path := range called {
		m := v.MethodByName(name)
		if !m.IsValid() {
			continue // not a kubernetes.Interface accessor
		}
		got := m.Call(nil)[0]
		if got.IsNil() || got.Elem().IsNil() {
			t.Errorf("%s calls %s(), which the plugin's clientset does not make: add it to clientset", path, name)
		}
	}
	if c.Discovery() == nil || c.DiscoveryClient == nil {
		t.Error("no discovery client")
	}
	rl := c.core.RESTClient().(*rest.RESTClient).GetRateLimiter()
	for _, other := range []rest.Interface{c.apps.RESTClient(), c.batch.RESTClient(), c.authz.RESTClient()} {
		if other.GetRateLimiter() != rl {
			t.Error("the groups' clients do not share one rate limiter")
		}
	}
	// A group the plugin does not call: nil, as the comment says.
	if c.NetworkingV1() == nil || !reflect.ValueOf(c.NetworkingV1()).IsNil() {
		t.Error("NetworkingV1 is made: the clientset is not narrow")
	}
}
