package runtime

import (
	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// TemplateDiff compares the pod template that s builds with tmpl, the pod
// template of an object in the cluster, on every field the spec decides
// (image, entrypoint and command, working directory, env and envFrom,
// volumes and mounts, security contexts, resources, ports, pull policy,
// node affinity, and the pod's host namespaces), and returns the names of
// the fields that differ, in that order; none when they agree. The
// server's defaults (an empty pod securityContext, a hostPath's empty type)
// are not differences.
func TemplateDiff(s spec.ContainerSpec, tmpl corev1.PodTemplateSpec) ([]string, error) {
	s.Normalize()
	want, err := PodTemplate(s)
	if err != nil {
		return nil, err
	}
	got := tmpl.Spec
	var diffs []string
	if len(got.Containers) != 1 {
		return []string{"containers (gobrave makes exactly one)"}, nil
	}
	if len(got.InitContainers) > 0 {
		diffs = append(diffs, "initContainers")
	}
	w, g := want.Spec.Containers[0], got.Containers[0]
	eq := equality.Semantic.DeepEqual
	for _, f := range []struct {
		name string
		same bool
	}{
		{"image", w.Image == g.Image},
		{"command (entrypoint)", eq(w.Command, g.Command)},
		{"args (command)", eq(w.Args, g.Args)},
		{"workingDir", w.WorkingDir == g.WorkingDir},
		{"env", eq(w.Env, g.Env)},
		{"envFrom", eq(w.EnvFrom, g.EnvFrom)},
		{"volumes", eq(normalVolumes(want.Spec.Volumes), normalVolumes(got.Volumes))},
		{"volumeMounts", eq(w.VolumeMounts, g.VolumeMounts)},
		{"securityContext", eq(w.SecurityContext, g.SecurityContext)},
		{"pod securityContext", eq(normalPodSecurity(want.Spec.SecurityContext), normalPodSecurity(got.SecurityContext))},
		{"hostNetwork, hostPID, hostIPC", !got.HostNetwork && !got.HostPID && !got.HostIPC},
		{"resources", eq(w.Resources, g.Resources)},
		{"ports", eq(w.Ports, g.Ports)},
		{"imagePullPolicy", w.ImagePullPolicy == g.ImagePullPolicy || g.ImagePullPolicy == ""},
		{"affinity", eq(want.Spec.Affinity, got.Affinity)},
	} {
		if !f.same {
			diffs = append(diffs, f.name)
		}
	}
	return diffs, nil
}

// normalVolumes drops the hostPath type the server defaults to "".
func normalVolumes(vs []corev1.Volume) []corev1.Volume {
	out := make([]corev1.Volume, len(vs))
	for i, v := range vs {
		out[i] = *v.DeepCopy()
		if hp := out[i].HostPath; hp != nil && hp.Type != nil && *hp.Type == corev1.HostPathUnset {
			hp.Type = nil
		}
	}
	return out
}

// normalPodSecurity treats nil as the empty context the server defaults to.
func normalPodSecurity(sc *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if sc == nil {
		return &corev1.PodSecurityContext{}
	}
	return sc
}
