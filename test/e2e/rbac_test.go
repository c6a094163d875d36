package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// saKubeconfig writes a kubeconfig for a ServiceAccount of ns bound only to
// the Role shipped as docs/rbac.yaml, and returns its path.
func saKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	ctx := t.Context()
	c := client(t)
	raw, err := os.ReadFile(filepath.Join(harness.root, "docs", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("docs/rbac.yaml: %v", err)
	}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runbook"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "runbook"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "runbook", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "runbook", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(harness.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kwok"] = cluster
	cfg.AuthInfos["runbook"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["runbook"] = &clientcmdapi.Context{Cluster: "kwok", AuthInfo: "runbook", Namespace: ns}
	cfg.CurrentContext = "runbook"
	path := filepath.Join(t.TempDir(), "runbook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A ServiceAccount bound only to docs/rbac.yaml in its namespace can use
// every verb there with no cluster-scoped permission; elsewhere it gets a
// clear forbidden error naming the verb, resource and namespace, and the
// monitor fails fast instead of hanging on a forbidden list.
func TestRBACNamespacedRole(t *testing.T) {
	ns := newNamespace(t)
	other := newNamespace(t)
	kc := saKubeconfig(t, ns)
	home := t.TempDir()
	env := []string{"KUBECONFIG=" + kc, "GOBRAVE_HOME=" + home}
	sa := func(args ...string) result { t.Helper(); return runWith(t, runOpts{env: env}, args...) }
	mustSA := func(args ...string) result {
		t.Helper()
		r := sa(args...)
		if r.code != 0 {
			t.Fatalf("kubectl gobrave %s as the ServiceAccount: %s", strings.Join(args, " "), r)
		}
		return r
	}

	if r := sa("doctor"); r.code != 0 {
		t.Errorf("doctor in the Role's namespace: %s", r)
	}
	mustSA("create", "web", "--image", "registry.invalid/web:1", "--port", "80", "--expose")
	mustSA("run", "task", "--kind", "job", "--image", "registry.invalid/job:1", "--timeout", "2m")
	mustSA("wait", "web", "--for=started", "--timeout", "2m")
	mustSA("ps", "-o", "json")
	mustSA("inspect", "web", "-o", "json")
	mustSA("logs", "web", "--tail", "1")
	mustSA("stop", "web", "--wait", "--timeout", "2m")
	mustSA("start", "web", "--wait", "--timeout", "2m")
	mustSA("restart", "web", "--wait", "--timeout", "2m")
	mustSA("restart", "task", "--wait", "--timeout", "2m")
	mustSA("create", "held", "--kind", "job", "--image", "registry.invalid/job:1", "--label", labelHold+"=true")
	mustSA("pause", "held", "--wait", "--timeout", "2m")
	mustSA("resume", "held", "--wait", "--timeout", "2m")
	mustSA("recover", "--once")
	mustSA("delete", "web", "task", "held", "--wait", "--timeout", "2m")
	mustSA("events", "web")

	// The Role lets the monitor watch pods: a pod that cannot pull its image ends the wait at once.
	r := sa("run", "typo", "--image", "ngnix:1.27", "--label", labelWaiting+"=ImagePullBackOff", "--timeout", "5m")
	wantLine := "error: k8s-" + ns + `|deployment|typo: ImagePullBackOff: Back-off pulling image "ngnix:1.27" (check the image name and pull secrets; kubectl gobrave inspect typo)`
	if r.code != 1 || lastStderrLine(r) != wantLine {
		t.Errorf("run of an image that cannot be pulled, as the ServiceAccount: %s\nwant exit code 1 and %s", r, wantLine)
	}

	// Another namespace: forbidden, named clearly, exit 1, nothing recorded.
	r = sa("create", "web", "-n", other, "--image", "registry.invalid/web:1")
	if r.code != 1 || !strings.Contains(r.stderr, "forbidden") || !strings.Contains(r.stderr, "deployments") || !strings.Contains(r.stderr, other) {
		t.Errorf("create in a namespace without the Role: %s, want exit 1 naming forbidden, deployments and %s", r, other)
	}
	if r := sa("doctor", "-n", other); r.code != 1 || !strings.Contains(r.stdout, "forbidden in namespace \""+other+"\"") {
		t.Errorf("doctor in a namespace without the Role: %s", r)
	}
	if r := sa("ps", "-a", "-n", other, "-o", "name"); r.code != 0 || r.stdout != "" {
		t.Errorf("a refused create left a record, or ps failed: %s", r)
	}

	// A record in a namespace the ServiceAccount cannot list: the monitor
	// fails fast with a forbidden error instead of waiting for a sync.
	st, err := store.Open(t.Context(), filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	id := "k8s-" + other + "|job|elsewhere"
	err = st.Put(t.Context(), store.Workload{RuntimeID: id, Runtime: "k8s", Namespace: other, Kind: "job", Name: "elsewhere", State: store.StateRunning},
		store.Transition{RuntimeID: id, Type: store.Created})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	r = runWith(t, runOpts{env: env, timeout: 2 * time.Minute}, "monitor", id, "-v=6")
	if r.code != 1 || !regexp.MustCompile(`(?m)^error: .*forbidden`).MatchString(r.stderr) {
		t.Errorf("monitor of an ID in a forbidden namespace: %s, want exit 1 and a forbidden error", r)
	}
	// Fast means at the first refusal: the watch-list and client-go's fallback list at most,
	// where waiting for a sync would retry for the whole sync timeout.
	refused := 0
	for _, m := range requestLine.FindAllStringSubmatch(r.stderr, -1) {
		if strings.HasSuffix(m[1], "/namespaces/"+other+"/jobs") {
			if m[2] != "403" {
				t.Errorf("a %s answer for %s, want only 403", m[2], m[1])
			}
			refused++
		}
	}
	if refused < 1 || refused > 2 {
		t.Errorf("%d refused requests for jobs in %s, want 1 or 2 (the first refusal ends the monitor):\n%s", refused, other, r.stderr)
	}
}
