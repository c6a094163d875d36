// Package runtime is the Kubernetes runtime of gobrave: it turns a
// ContainerSpec into a Deployment (plus an optional ClusterIP Service) or a
// Job, and carries out the lifecycle verbs on them through kubernetes.Interface.
package runtime

import (
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// Labels and annotations put on every managed object.
const (
	LabelApp      = "app"
	LabelWorkload = "gobrave-workload"
	// LabelKind is on a deployment's pod template only (value deployment), so
	// its Service never selects the pods of a job of the same name. It is not
	// in the Deployment's selector, which is immutable.
	LabelKind = "gobrave.dev/kind"
	// AnnotationSpec keeps the ContainerSpec on the workload so that a
	// teammate's `adopt` can re-create a stopped job from the cluster alone.
	AnnotationSpec = "gobrave.dev/spec"
	// ServiceSuffix names the Service of a deployment: <name>-svc.
	ServiceSuffix = "-svc"
	// HostnameKey is what the constraint key "hostname" stands for.
	HostnameKey = "kubernetes.io/hostname"
)

// ServiceName returns the name of the Service of workload name.
func ServiceName(name string) string { return name + ServiceSuffix }

// ServiceDNS returns the cluster DNS name of the Service of workload name.
func ServiceDNS(name, namespace string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local", ServiceName(name), namespace)
}

// Selector is the label selector of workload name's pods.
func Selector(name string) string { return LabelWorkload + "=" + name }

// Objects are the Kubernetes objects one ContainerSpec becomes.
type Objects struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	Job        *batchv1.Job
}

// Build maps a validated spec to its objects in namespace. It is a pure
// function: the same spec always gives the same objects.
func Build(s spec.ContainerSpec, namespace string) (Objects, error) {
	s.Normalize()
	tmpl, err := PodTemplate(s)
	if err != nil {
		return Objects{}, err
	}
	meta := objectMeta(s, namespace)
	raw, err := json.Marshal(s)
	if err != nil {
		return Objects{}, fmt.Errorf("encode spec of %q: %w", s.Name, err)
	}
	meta.Annotations = map[string]string{AnnotationSpec: string(raw)}

	k, err := KindOf(s.Kind())
	if err != nil {
		return Objects{}, fmt.Errorf("%w: workloadKind %q: use deployment or job", spec.ErrInvalid, s.WorkloadKind)
	}
	return k.Build(s, meta, tmpl)
}

// Labels returns the labels of every object of s: the user's labels with
// app and gobrave-workload set to the name (they cannot be replaced) and
// without gobrave.dev/kind (Build sets it where it belongs).
func Labels(s spec.ContainerSpec) map[string]string {
	l := make(map[string]string, len(s.Labels)+2)
	for k, v := range s.Labels {
		l[k] = v
	}
	delete(l, LabelKind)
	l[LabelApp] = s.Name
	l[LabelWorkload] = s.Name
	return l
}

func objectMeta(s spec.ContainerSpec, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: s.Name, Namespace: namespace, Labels: Labels(s)}
}

// PodTemplate maps the container part of s, as the specification's "Pod Spec
// Mapping" says. The restart policy is set by Build.
func PodTemplate(s spec.ContainerSpec) (corev1.PodTemplateSpec, error) {
	c := corev1.Container{
		Name:            s.Name,
		Image:           s.Image,
		Command:         s.Entrypoint,
		Args:            s.Command,
		WorkingDir:      s.WorkDir,
		ImagePullPolicy: corev1.PullPolicy(s.PullPolicy),
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	for _, e := range s.EnvSecrets {
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: e.Secret}, Key: e.Key},
		}})
	}
	for _, name := range s.EnvFromSecrets {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
		}})
	}

	res := corev1.ResourceList{}
	if q, ok := s.CPUQuantity(); ok {
		res[corev1.ResourceCPU] = q
	}
	if s.Memory != "" {
		q, err := s.Memory.Parse()
		if err != nil {
			return corev1.PodTemplateSpec{}, fmt.Errorf("%w: memory %q: %v", spec.ErrInvalid, s.Memory, err)
		}
		res[corev1.ResourceMemory] = q
	}
	if len(res) > 0 {
		c.Resources = corev1.ResourceRequirements{Limits: res, Requests: copyResources(res)}
	}

	var vols []corev1.Volume
	for i, v := range s.Volumes {
		name := fmt.Sprintf("vol-%d", i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: v.Source},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: v.Target, ReadOnly: v.ReadOnly})
	}

	sc, err := securityContext(s)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	c.SecurityContext = sc

	if s.ExposedPort > 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: s.ExposedPort, Protocol: corev1.ProtocolTCP}}
	}

	// No service-account token: a gobrave workload is a docker-like
	// container and gets no credentials for the cluster's API (see
	// docs/security.md). The baseline profile asks for nothing more.
	pod := corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols, AutomountServiceAccountToken: ptr(false)}
	if s.SecurityProfile == spec.ProfileRestricted {
		pod.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	if aff := nodeAffinity(s.SchedulingConstraints); aff != nil {
		pod.Affinity = &corev1.Affinity{NodeAffinity: aff}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: Labels(s)},
		Spec:       pod,
	}, nil
}

// securityContext is the container's security context: --user's uid and
// gid, and for the restricted profile what the restricted Pod Security
// Standard asks of a container. nil when there is nothing to set.
func securityContext(s spec.ContainerSpec) (*corev1.SecurityContext, error) {
	var sc corev1.SecurityContext
	if s.User != "" {
		uid, gid, err := spec.ParseUser(s.User)
		if err != nil {
			return nil, err
		}
		sc.RunAsUser, sc.RunAsGroup = &uid, gid
	}
	if s.SecurityProfile == spec.ProfileRestricted {
		sc.RunAsNonRoot = ptr(true)
		sc.AllowPrivilegeEscalation = ptr(false)
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	if sc == (corev1.SecurityContext{}) {
		return nil, nil
	}
	return &sc, nil
}

func copyResources(in corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(in))
	for k, v := range in {
		out[k] = v.DeepCopy()
	}
	return out
}

func nodeAffinity(cs []spec.SchedulingConstraint) *corev1.NodeAffinity {
	var reqs []corev1.NodeSelectorRequirement
	for _, c := range cs {
		if c.Type != "" && c.Type != "node" {
			continue
		}
		key := c.Key
		if key == "hostname" {
			key = HostnameKey
		}
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key:      key,
			Operator: corev1.NodeSelectorOperator(c.Operator),
			Values:   c.Values,
		})
	}
	if len(reqs) == 0 {
		return nil
	}
	return &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
