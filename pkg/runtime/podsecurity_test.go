package runtime

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// podSecurity judges a pod template as the API server's PodSecurity
// admission does (the same policy library, latest version of the level).
func podSecurity(t *testing.T, level psapi.Level, tmpl corev1.PodTemplateSpec) policy.AggregateCheckResult {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return policy.AggregateCheckResults(e.EvaluatePod(psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
}

// The defaults pass baseline; --security-profile restricted passes
// restricted; the default does not pass restricted, a hostPath does not pass
// baseline.
func TestPodTemplatePodSecurity(t *testing.T) {
	base := spec.ContainerSpec{Name: "web", Image: "nginx:1.27", Env: map[string]string{"A": "b"}, CPU: 0.5, Memory: "64Mi", ExposedPort: 80}
	tests := []struct {
		name   string
		edit   func(*spec.ContainerSpec)
		level  psapi.Level
		reason string // "" means allowed
	}{
		{name: "default passes baseline", edit: func(*spec.ContainerSpec) {}, level: psapi.LevelBaseline},
		{name: "default as root passes baseline", edit: func(s *spec.ContainerSpec) { s.User = "0:0" }, level: psapi.LevelBaseline},
		{name: "default job passes baseline", edit: func(s *spec.ContainerSpec) { s.WorkloadKind = "job" }, level: psapi.LevelBaseline},
		{name: "restricted passes restricted", edit: func(s *spec.ContainerSpec) { s.SecurityProfile = "restricted" }, level: psapi.LevelRestricted},
		{name: "restricted with a user passes restricted", edit: func(s *spec.ContainerSpec) { s.SecurityProfile = "restricted"; s.User = "1000:1000" }, level: psapi.LevelRestricted},
		{name: "restricted with secrets passes restricted", edit: func(s *spec.ContainerSpec) {
			s.SecurityProfile = "restricted"
			s.EnvSecrets = []spec.EnvSecret{{Name: "PW", Secret: "db", Key: "pw"}}
			s.EnvFromSecrets = []string{"app-env"}
		}, level: psapi.LevelRestricted},
		{name: "default fails restricted", edit: func(*spec.ContainerSpec) {}, level: psapi.LevelRestricted,
			reason: "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"},
		{name: "hostPath fails baseline", edit: func(s *spec.ContainerSpec) {
			s.Volumes = []spec.Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}}
		},
			level: psapi.LevelBaseline, reason: "hostPath volumes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.edit(&s)
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			objs, err := Build(s, "default")
			if err != nil {
				t.Fatal(err)
			}
			got := podSecurity(t, tt.level, *objs.PodTemplate())
			if tt.reason == "" {
				if !got.Allowed {
					t.Fatalf("%s refuses it: %s", tt.level, strings.Join(got.ForbiddenReasons, ", "))
				}
				return
			}
			if got.Allowed || strings.Join(got.ForbiddenReasons, ", ") != tt.reason {
				t.Fatalf("%s: allowed %v, reasons %q, want refused for %q", tt.level, got.Allowed, got.ForbiddenReasons, tt.reason)
			}
		})
	}
}

func TestPodTemplateSecurityAndSecrets(t *testing.T) {
	s := spec.ContainerSpec{
		Name: "task", Image: "busybox", WorkloadKind: "job", SecurityProfile: "restricted", User: "1000",
		Env:            map[string]string{"MODE": "x"},
		EnvSecrets:     []spec.EnvSecret{{Name: "DB_PASSWORD", Secret: "db-creds", Key: "password"}},
		EnvFromSecrets: []string{"app-env"},
	}
	tmpl, err := PodTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	c := tmpl.Spec.Containers[0]
	wantEnv := []corev1.EnvVar{
		{Name: "MODE", Value: "x"},
		{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}, Key: "password"}}},
	}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-env"}}}}
	if diff := cmp.Diff(wantFrom, c.EnvFrom); diff != "" {
		t.Errorf("envFrom (-want +got):\n%s", diff)
	}
	uid := int64(1000)
	wantSC := &corev1.SecurityContext{
		RunAsUser: &uid, RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if diff := cmp.Diff(wantSC, c.SecurityContext); diff != "" {
		t.Errorf("container securityContext (-want +got):\n%s", diff)
	}
	wantPSC := &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if diff := cmp.Diff(wantPSC, tmpl.Spec.SecurityContext); diff != "" {
		t.Errorf("pod securityContext (-want +got):\n%s", diff)
	}
	if a := tmpl.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken = %v, want false", a)
	}

	// The default profile sets no security context at all, a volume can be read-only.
	tmpl, err = PodTemplate(spec.ContainerSpec{Name: "web", Image: "nginx", Volumes: []spec.Volume{{Source: "/a", Target: "/a", ReadOnly: true}, {Source: "/b", Target: "/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	c = tmpl.Spec.Containers[0]
	if c.SecurityContext != nil || tmpl.Spec.SecurityContext != nil {
		t.Errorf("default profile security contexts: %+v, %+v", c.SecurityContext, tmpl.Spec.SecurityContext)
	}
	if !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[1].ReadOnly {
		t.Errorf("mounts = %+v, want the first read-only", c.VolumeMounts)
	}
}
