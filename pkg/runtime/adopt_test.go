package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

func TestTemplateDiff(t *testing.T) {
	s := spec.ContainerSpec{
		Name: "web", Image: "nginx:1.27", Entrypoint: []string{"/bin/sh"}, Command: []string{"-c", "run"}, WorkDir: "/srv",
		Env: map[string]string{"A": "b"}, EnvSecrets: []spec.EnvSecret{{Name: "PW", Secret: "db", Key: "pw"}}, EnvFromSecrets: []string{"app"},
		CPU: 0.5, Memory: "64Mi", Volumes: []spec.Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}},
		User: "1000:1000", ExposedPort: 80, SecurityProfile: "restricted",
		SchedulingConstraints: []spec.SchedulingConstraint{{Key: "disktype", Operator: "In", Values: []string{"ssd"}}},
	}
	s.Volumes = nil // restricted allows no hostPath; volumes are checked below with the baseline profile
	base, err := PodTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec func(*spec.ContainerSpec)
		edit func(*corev1.PodSpec)
		want []string
	}{
		{name: "the template it built", edit: func(*corev1.PodSpec) {}},
		{name: "the server's defaults", edit: func(p *corev1.PodSpec) {
			p.Containers[0].TerminationMessagePath = "/dev/termination-log"
			p.DNSPolicy, p.SchedulerName = corev1.DNSClusterFirst, "default-scheduler"
			p.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("500m")
		}},
		{name: "another image", edit: func(p *corev1.PodSpec) { p.Containers[0].Image = "evil:1" }, want: []string{"image"}},
		{name: "another command", edit: func(p *corev1.PodSpec) { p.Containers[0].Args = []string{"-c", "mine"} }, want: []string{"args (command)"}},
		{name: "an env value", edit: func(p *corev1.PodSpec) { p.Containers[0].Env[0].Value = "c" }, want: []string{"env"}},
		{name: "privileged", edit: func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Privileged = ptr(true) }, want: []string{"securityContext"}},
		{name: "pod root", edit: func(p *corev1.PodSpec) { p.SecurityContext.RunAsNonRoot = ptr(false) }, want: []string{"pod securityContext"}},
		{name: "host network", edit: func(p *corev1.PodSpec) { p.HostNetwork = true }, want: []string{"hostNetwork, hostPID, hostIPC"}},
		{name: "more memory", edit: func(p *corev1.PodSpec) {
			p.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}, want: []string{"resources"}},
		{name: "an init container", edit: func(p *corev1.PodSpec) { p.InitContainers = []corev1.Container{{Name: "x", Image: "evil"}} }, want: []string{"initContainers"}},
		{name: "a second container", edit: func(p *corev1.PodSpec) { p.Containers = append(p.Containers, corev1.Container{Name: "x"}) },
			want: []string{"containers (gobrave makes exactly one)"}},
		{name: "another affinity", edit: func(p *corev1.PodSpec) { p.Affinity = nil }, want: []string{"affinity"}},
		{name: "a volume the spec does not have", edit: func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "vol-0", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "vol-0", MountPath: "/host"}}
		}, want: []string{"volumes", "volumeMounts"}},
		{name: "a defaulted hostPath type is no difference", spec: func(s *spec.ContainerSpec) {
			s.SecurityProfile, s.User = "", "1000"
			s.Volumes = []spec.Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}}
		}, edit: func(p *corev1.PodSpec) {
			unset := corev1.HostPathUnset
			p.Volumes[0].HostPath.Type = &unset
			p.SecurityContext = &corev1.PodSecurityContext{}
		}},
		{name: "a read-only mount made writable", spec: func(s *spec.ContainerSpec) {
			s.SecurityProfile, s.User = "", "1000"
			s.Volumes = []spec.Volume{{Source: "/srv", Target: "/srv", ReadOnly: true}}
		}, edit: func(p *corev1.PodSpec) { p.Containers[0].VolumeMounts[0].ReadOnly = false }, want: []string{"volumeMounts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := s
			tmpl := *base.DeepCopy()
			if tt.spec != nil {
				tt.spec(&sp)
				if tmpl, err = PodTemplate(sp); err != nil {
					t.Fatal(err)
				}
			}
			tt.edit(&tmpl.Spec)
			got, err := TemplateDiff(sp, tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TemplateDiff (-want +got):\n%s", diff)
			}
		})
	}
}
