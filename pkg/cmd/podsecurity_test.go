package cmd_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// A namespace whose admission refuses the workload's pods: the dry run of a
// pod of the template is refused, create exits 1 with the server's reason on
// one line, and nothing is created or recorded.
func TestCreateRefusedByPodSecurity(t *testing.T) {
	h := newHarness(t)
	c := h.clusters[""]
	var dryRuns []*corev1.Pod
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) == 0 || ca.CreateOptions.DryRun[0] != metav1.DryRunAll {
			t.Errorf("a pod create that is not a dry run: %+v", ca.CreateOptions)
		}
		pod := ca.GetObject().(*corev1.Pod)
		dryRuns = append(dryRuns, pod)
		if len(pod.Spec.Volumes) == 0 {
			return true, pod, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-x7k2p",
			errorString(`violates PodSecurity "baseline:latest": hostPath volumes (volume "vol-0")`))
	})
	before, _ := h.snapshot()
	r := h.run("create", "web", "--image", "nginx:1.27", "--volume", "/srv:/srv:ro")
	want := `create deployment "web" in namespace "default": its pods would be refused: violates PodSecurity "baseline:latest": hostPath volumes (volume "vol-0") (the namespace's pod-security.kubernetes.io/enforce label sets the level; see docs/security.md)`
	if r.code != 1 || r.msg != want {
		t.Fatalf("create refused by Pod Security: %v\nmsg %q\nwant %q", r, r.msg, want)
	}
	if _, err := h.deployment("", "default", "web"); !apierrors.IsNotFound(err) {
		t.Errorf("the deployment exists after a refused create: %v", err)
	}
	after, _ := h.snapshot()
	if diff := cmp.Diff(before, after, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the database changed (-before +after):\n%s", diff)
	}
	if len(dryRuns) != 1 || dryRuns[0].Namespace != "default" || !dryRuns[0].Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Fatalf("dry runs = %+v, want one pod of the template in default", dryRuns)
	}

	// Without the volume the same namespace admits the pod, and it is created.
	if out := h.ok("create", "web", "--image", "nginx:1.27"); out != "k8s-default|deployment|web\n" {
		t.Errorf("create without the volume: %q", out)
	}
	if len(dryRuns) != 2 {
		t.Errorf("%d dry runs, want 2", len(dryRuns))
	}
}

// A namespace enforcing restricted: the refusal suggests --security-profile restricted.
func TestCreateRefusedByRestrictedSuggestsTheProfile(t *testing.T) {
	h := newHarness(t)
	h.clusters[""].PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "task-abcde",
			errorString(`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "task" must set securityContext.allowPrivilegeEscalation=false)`))
	})
	r := h.run("create", "task", "--kind", "job", "--image", "busybox")
	if r.code != 1 || !strings.Contains(r.msg, `its pods would be refused: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`) ||
		!strings.Contains(r.msg, "pass --security-profile restricted") || strings.Contains(r.msg, "task-abcde") {
		t.Fatalf("create in a restricted namespace: %v", r)
	}
	if _, err := h.job("", "default", "task"); !apierrors.IsNotFound(err) {
		t.Errorf("the job exists after a refused create: %v", err)
	}
	if _, exists := h.snapshot(); exists {
		if ws := h.ps("-a"); len(ws) != 0 {
			t.Errorf("records after a refused create: %+v", ws)
		}
	}
}

// When the dry run cannot be made — the user's Role does not allow creating
// pods, the new namespace's default ServiceAccount is not there yet, a
// webhook with side effects — the check is skipped and the workload is
// created; any other error of the dry run fails the create before anything
// is made.
func TestCreateWhenTheDryRunCannotBeMade(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string // "" means created
	}{
		{name: "no permission", err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
			errorString(`User "ci" cannot create resource "pods" in API group "" in the namespace "default"`))},
		{name: "no service account yet", err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-abcde",
			errorString(`error looking up service account default/default: serviceaccount "default" not found`))},
		{name: "webhook without dry run", err: apierrors.NewBadRequest(`admission webhook "audit.example.com" does not support dry run`)},
		{name: "server error", err: apierrors.NewInternalError(errorString("etcd is sad")),
			want: `create deployment "web" in namespace "default": check its pods with a dry run: Internal error occurred: etcd is sad`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.clusters[""].PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, tt.err
			})
			r := h.run("create", "web", "--image", "nginx:1.27")
			if tt.want == "" {
				if r.code != 0 || r.stdout != "k8s-default|deployment|web\n" {
					t.Errorf("create: %v", r)
				}
				return
			}
			if r.code != 1 || r.msg != tt.want {
				t.Errorf("create: %v\nmsg  %q\nwant %q", r, r.msg, tt.want)
			}
			if _, err := h.deployment("", "default", "web"); !apierrors.IsNotFound(err) {
				t.Errorf("the deployment exists after a failed check: %v", err)
			}
		})
	}
}

// --env-secret and --env-from-secret become a secretKeyRef and an envFrom;
// no secret value is anywhere, the references are in the record.
func TestCreateEnvSecrets(t *testing.T) {
	h := newHarness(t)
	h.ok("create", "task", "--kind", "job", "--image", "busybox", "--env", "MODE=x",
		"--env-secret", "DB_PASSWORD=db-creds/password", "--env-from-secret", "app-env", "--security-profile", "restricted", "--user", "1000")
	j, err := h.job("", "default", "task")
	if err != nil {
		t.Fatal(err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	wantEnv := []corev1.EnvVar{{Name: "MODE", Value: "x"}, {Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}, Key: "password"}}}}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "app-env" {
		t.Errorf("envFrom = %+v", c.EnvFrom)
	}
	if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("restricted security context = %+v", c.SecurityContext)
	}
	w := h.workload("k8s-default|job|task")
	if len(w.Spec.EnvSecrets) != 1 || w.Spec.EnvSecrets[0].Secret != "db-creds" || len(w.Spec.EnvFromSecrets) != 1 || w.Spec.SecurityProfile != "restricted" {
		t.Errorf("recorded spec = %+v", w.Spec)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--env-secret", "DB_PASSWORD"}, `--env-secret "DB_PASSWORD": must be NAME=SECRET/KEY`},
		{[]string{"--env-secret", "X=Bad_Secret/k"}, `envSecrets[0].secret "Bad_Secret": must be a Secret name`},
		{[]string{"--env-from-secret", "Nope!"}, `envFromSecrets[0] "Nope!": must be a Secret name`},
		{[]string{"--security-profile", "privileged"}, `securityProfile "privileged": must be baseline (the default) or restricted`},
		{[]string{"--volume", "/:/host"}, `volumes[0].source "/": refused, it is the node's whole filesystem; mount a narrower folder, or pass --allow-unsafe-host-path`},
		{[]string{"--volume", "/run/containerd/containerd.sock:/c.sock"}, `pass --allow-unsafe-host-path`},
	} {
		h.clearActions()
		r := h.run(append([]string{"create", "bad", "--image", "busybox"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.msg, tt.want) {
			t.Errorf("create %v: %v, want exit 2 with %q", tt.args, r, tt.want)
		}
		if n := h.actions(); n != 0 {
			t.Errorf("create %v made %d API calls: %s", tt.args, n, h.describeActions())
		}
	}
	// Explicitly allowed.
	h.ok("create", "dind", "--image", "docker:27", "--volume", "/var/run/docker.sock:/var/run/docker.sock", "--allow-unsafe-host-path")
}

type errorString string

func (e errorString) Error() string { return string(e) }
