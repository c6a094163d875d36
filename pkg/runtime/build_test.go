package runtime

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func fullSpec() spec.ContainerSpec {
	return spec.ContainerSpec{
		Name:          "web-api",
		Image:         "nginx:1.27",
		Entrypoint:    []string{"/bin/sh", "-c"},
		Command:       []string{"exec nginx -g 'daemon off;'"},
		WorkDir:       "/srv",
		Env:           map[string]string{"ZED": "last", "ALPHA": "first", "MID": "x=y"},
		CPU:           0.5,
		Memory:        "256Mi",
		Volumes:       []spec.Volume{{Source: "/data/web", Target: "/usr/share/nginx/html"}, {Source: "/var/log/web", Target: "/var/log/nginx"}},
		User:          "1000:2000",
		ExposedPort:   8080,
		ExposeService: true,
		Labels:        map[string]string{"team": "payments", "app": "ignored", "gobrave-workload": "ignored", "gobrave.dev/kind": "ignored"},
		PullPolicy:    "Always",
		SchedulingConstraints: []spec.SchedulingConstraint{
			{Type: "node", Key: "hostname", Operator: "In", Values: []string{"node-1", "node-2"}},
			{Key: "disktype", Operator: "NotIn", Values: []string{"hdd"}},
			{Key: "gpu", Operator: "Exists"},
			{Key: "spot", Operator: "DoesNotExist"},
			{Key: "cores", Operator: "Gt", Values: []string{"4"}},
			{Key: "load", Operator: "Lt", Values: []string{"9"}},
		},
	}
}

func golden(t *testing.T, name string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/runtime -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run with -update if intended:\n%s", name, diff)
	}
}

func TestBuildGolden(t *testing.T) {
	objs, err := Build(fullSpec(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "deployment.golden.yaml", objs.Deployment)
	golden(t, "service.golden.yaml", objs.Service)
	job := fullSpec()
	job.Name, job.WorkloadKind, job.ExposeService = "batch-import-001", "job", false
	objs, err = Build(job, "ai")
	if err != nil {
		t.Fatal(err)
	}
	if objs.Deployment != nil || objs.Service != nil {
		t.Errorf("a job spec built a deployment or service: %+v", objs)
	}
	golden(t, "job.golden.yaml", objs.Job)
}

// TestServiceSelector: the Service of a deployment selects the pods of that
// deployment's template and not those of a job of the same name, while the
// Deployment's own (immutable) selector stays what existing ones have.
func TestServiceSelector(t *testing.T) {
	dep := spec.ContainerSpec{Name: "web", Image: "nginx", ExposedPort: 80, ExposeService: true}
	d, err := Build(dep, "default")
	if err != nil {
		t.Fatal(err)
	}
	// A user label that claims the kind is dropped, not copied to the job's pods.
	job := spec.ContainerSpec{Name: "web", Image: "busybox", WorkloadKind: "job", Labels: map[string]string{LabelKind: "deployment"}}
	j, err := Build(job, "default")
	if err != nil {
		t.Fatal(err)
	}
	svc := labels.SelectorFromSet(d.Service.Spec.Selector)
	tests := []struct {
		name      string
		got, want any
	}{
		{"service selector", d.Service.Spec.Selector, map[string]string{LabelWorkload: "web", LabelKind: "deployment"}},
		{"deployment selector unchanged", d.Deployment.Spec.Selector.MatchLabels, map[string]string{LabelWorkload: "web"}},
		{"deployment's pods carry the kind", d.Deployment.Spec.Template.Labels[LabelKind], "deployment"},
		{"the service selects the deployment's pods", svc.Matches(labels.Set(d.Deployment.Spec.Template.Labels)), true},
		{"the service does not select the job's pods", svc.Matches(labels.Set(j.Job.Spec.Template.Labels)), false},
		{"the deployment selects its template", labels.SelectorFromSet(d.Deployment.Spec.Selector.MatchLabels).Matches(labels.Set(d.Deployment.Spec.Template.Labels)), true},
		{"no kind on the objects themselves", []string{d.Deployment.Labels[LabelKind], d.Service.Labels[LabelKind], j.Job.Labels[LabelKind]}, []string{"", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestPodTemplateMapping(t *testing.T) {
	s := fullSpec()
	tmpl, err := PodTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	c := tmpl.Spec.Containers[0]
	uid, gid := int64(1000), int64(2000)
	tests := []struct {
		name      string
		got, want any
	}{
		{"entrypoint is the command", c.Command, []string{"/bin/sh", "-c"}},
		{"command is the args", c.Args, []string{"exec nginx -g 'daemon off;'"}},
		{"workdir", c.WorkingDir, "/srv"},
		{"env sorted by key", c.Env, []corev1.EnvVar{{Name: "ALPHA", Value: "first"}, {Name: "MID", Value: "x=y"}, {Name: "ZED", Value: "last"}}},
		{"cpu limit", c.Resources.Limits.Cpu().String(), "500m"},
		{"cpu request", c.Resources.Requests.Cpu().String(), "500m"},
		{"memory limit", c.Resources.Limits.Memory().String(), "256Mi"},
		{"memory request", c.Resources.Requests.Memory().String(), "256Mi"},
		{"hostPath volumes", len(tmpl.Spec.Volumes), 2},
		{"hostPath source", tmpl.Spec.Volumes[1].HostPath.Path, "/var/log/web"},
		{"mount target", c.VolumeMounts[1].MountPath, "/var/log/nginx"},
		{"runAsUser", c.SecurityContext.RunAsUser, &uid},
		{"runAsGroup", c.SecurityContext.RunAsGroup, &gid},
		{"containerPort", c.Ports, []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}},
		{"pull policy", c.ImagePullPolicy, corev1.PullAlways},
		{"hostname key", tmpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key, HostnameKey},
		{"six requirements", len(tmpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions), 6},
		{"reserved labels win", tmpl.Labels, map[string]string{"app": "web-api", "gobrave-workload": "web-api", "team": "payments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestPodTemplateDefaults(t *testing.T) {
	s := spec.ContainerSpec{Name: "x", Image: "busybox", User: "42", Memory: "1048576"}
	tmpl, err := PodTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	c := tmpl.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("default pull policy = %q, want IfNotPresent", c.ImagePullPolicy)
	}
	if c.SecurityContext.RunAsGroup != nil || *c.SecurityContext.RunAsUser != 42 {
		t.Errorf("user 42: got %+v", c.SecurityContext)
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("1Mi")) != 0 {
		t.Errorf("memory 1048576 bytes = %s, want 1Mi", got.String())
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("cpu limit set without cpu")
	}
	if tmpl.Spec.Affinity != nil || len(c.Ports) != 0 || len(tmpl.Spec.Volumes) != 0 {
		t.Errorf("unset fields produced affinity, ports or volumes: %+v", tmpl.Spec)
	}
}

func TestBuildRestartPolicies(t *testing.T) {
	objs, err := Build(spec.ContainerSpec{Name: "svc", Image: "nginx", ExposedPort: 80}, "default")
	if err != nil {
		t.Fatal(err)
	}
	if objs.Deployment.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || *objs.Deployment.Spec.Replicas != 1 {
		t.Errorf("deployment: restartPolicy %q replicas %d", objs.Deployment.Spec.Template.Spec.RestartPolicy, *objs.Deployment.Spec.Replicas)
	}
	if objs.Service != nil {
		t.Error("service made without exposeService")
	}
	objs, err = Build(spec.ContainerSpec{Name: "task", Image: "busybox", WorkloadKind: "job"}, "default")
	if err != nil {
		t.Fatal(err)
	}
	if objs.Job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || *objs.Job.Spec.BackoffLimit != 0 {
		t.Errorf("job: restartPolicy %q backoffLimit %d", objs.Job.Spec.Template.Spec.RestartPolicy, *objs.Job.Spec.BackoffLimit)
	}
}

func TestEnsureImage(t *testing.T) {
	tests := []struct {
		policy  string
		wantErr string
	}{
		{"", ""}, {"Always", ""}, {"IfNotPresent", ""},
		{"Never", `pull policy "Never" is refused`},
		{"Sometimes", `pull policy "Sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			err := EnsureImage(spec.ContainerSpec{Name: "x", Image: "busybox", PullPolicy: tt.policy})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveNamespace(t *testing.T) {
	tests := []struct{ spec, profile, kube, want string }{
		{"a", "b", "c", "a"}, {"", "b", "c", "b"}, {"", "", "c", "c"}, {"", "", "", "default"},
	}
	for _, tt := range tests {
		if got := ResolveNamespace(tt.spec, tt.profile, tt.kube); got != tt.want {
			t.Errorf("ResolveNamespace(%q,%q,%q) = %q, want %q", tt.spec, tt.profile, tt.kube, got, tt.want)
		}
	}
}

// TestBuildProgressDeadline: progressDeadline becomes the Deployment's
// progressDeadlineSeconds; unset leaves the Kubernetes default.
func TestBuildProgressDeadline(t *testing.T) {
	s := spec.ContainerSpec{Name: "web", Image: "nginx:1.27", ProgressDeadline: "2m"}
	objs, err := Build(s, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := objs.Deployment.Spec.ProgressDeadlineSeconds; got == nil || *got != 120 {
		t.Fatalf("progressDeadlineSeconds = %v, want 120", got)
	}
	s.ProgressDeadline = ""
	if objs, err = Build(s, "ns"); err != nil || objs.Deployment.Spec.ProgressDeadlineSeconds != nil {
		t.Fatalf("unset: progressDeadlineSeconds %v, err %v; want nil", objs.Deployment.Spec.ProgressDeadlineSeconds, err)
	}
	s.ProgressDeadline = "1.5s"
	if _, err := Build(s, "ns"); err == nil || !strings.Contains(err.Error(), `progressDeadline "1.5s": must be whole seconds`) {
		t.Fatalf("Build = %v, want the whole-seconds error", err)
	}
}
