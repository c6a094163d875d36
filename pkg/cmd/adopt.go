package cmd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// AdoptOptions are the options of adopt.
type AdoptOptions struct {
	genericiooptions.IOStreams
	f             *Factory
	AllNamespaces bool
	Force         bool
}

// NewCmdAdopt imports workloads that carry the gobrave-workload label.
func NewCmdAdopt(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &AdoptOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "adopt [-n NAMESPACE | -A]",
		Short: "Import workloads made elsewhere (they carry the gobrave-workload label) into the state database",
		Long: `Import the Deployments and Jobs in the cluster that carry the gobrave-workload label — made
on a colleague's machine, say — into the local state database with their current state, so a
teammate on a fresh laptop can take over. The cluster is the shared truth; the database is each
person's index of it. The spec comes from the object's gobrave.dev/spec annotation (so a stopped
job can run again); records that already know the object are left alone.

The annotation is text anyone who can edit the object may write, so it is checked like a spec
file and compared with the object's own pod template (image, command, env, volumes, security
context, resources…): an object whose annotation disagrees with its template, or asks for
allowUnsafeHostPath, is refused with a line naming the fields. A record that knows another object
of that name (another UID) is never replaced without --force. Each adopted ID is printed with its
kind and image. See docs/security.md.`,
		Example: `  kubectl gobrave adopt -n team-a
  kubectl gobrave adopt -A --runtime k3s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Adopt from every namespace")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Replace a record that knows another object of the same name (another UID)")
	return cmd
}

// Run adopts.
func (o *AdoptOptions) Run(ctx context.Context) error {
	rtName, err := o.f.Runtime()
	if err != nil {
		return err
	}
	ns := metav1.NamespaceAll
	if !o.AllNamespaces {
		if ns, err = o.f.Namespace(rtName, ""); err != nil {
			return err
		}
	}
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	client, err := o.f.Client(rtName)
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: runtime.LabelWorkload}
	deps, err := client.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("adopt: list deployments: %w", err)
	}
	jobs, err := client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("adopt: list jobs: %w", err)
	}
	var found []adoptee
	for i := range deps.Items {
		d := &deps.Items[i]
		obs, ok := runtime.DeploymentEvent(d)
		found = append(found, adoptee{meta: d.ObjectMeta, kind: runtimeid.KindDeployment, obs: obs, seen: ok, tmpl: d.Spec.Template})
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		obs, ok := runtime.JobEvent(j)
		found = append(found, adoptee{meta: j.ObjectMeta, kind: runtimeid.KindJob, obs: obs, seen: ok, tmpl: j.Spec.Template})
	}
	sort.Slice(found, func(a, b int) bool { return found[a].key() < found[b].key() })

	var adopted, known int
	var errs []error
	for _, a := range found {
		id, err := runtimeid.New(rtName, a.meta.Namespace, a.kind, a.meta.Name)
		if err != nil {
			continue // not a name gobrave could have made
		}
		if w, err := st.Get(ctx, id.String()); err == nil && w.UID == string(a.meta.UID) {
			// The same object (UIDs are unique): if the record knew it
			// under another cluster identity (a moved API server, a rotated
			// CA), it is this one now.
			if err := o.setCluster(ctx, st, rtName, id); err != nil {
				errs = append(errs, err)
				continue
			}
			known++
			continue
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		what := ref(id.Kind, id.Name)
		s, err := a.spec()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s not adopted: %w", what, err))
			continue
		}
		now := time.Now().UTC()
		w := store.Workload{
			RuntimeID: id.String(), Runtime: rtName, Namespace: id.Namespace, Kind: id.Kind, Name: id.Name,
			UID: string(a.meta.UID), Spec: s, State: a.state(), Message: a.obs.Message,
			CreatedAt: a.meta.CreationTimestamp.UTC(), UpdatedAt: now,
		}
		err = st.PutAdopted(ctx, w, store.Transition{RuntimeID: w.RuntimeID, Type: store.Adopted, UID: w.UID, Message: "adopted from the cluster, " + string(w.State), Time: now}, o.Force)
		if errors.Is(err, store.ErrOtherUID) {
			errs = append(errs, fmt.Errorf("%s not adopted: %w; pass --force to replace the record (see 'kubectl gobrave inspect %s')", what, err, id))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("adopt %s: %w", id, err))
			continue
		}
		// The object lives where the runtime points now.
		if err := o.setCluster(ctx, st, rtName, id); err != nil {
			errs = append(errs, err)
			continue
		}
		adopted++
		fmt.Fprintf(o.Out, "%s adopted (%s, %s, image %s)\n", what, id, w.State, s.Image)
	}
	fmt.Fprintf(o.ErrOut, "adopted %d, already known %d, refused %d\n", adopted, known, len(errs))
	return errors.Join(errs...)
}

// setCluster records the cluster runtime rt points at as id's
// (docs/architecture.md, "Which cluster a record belongs to").
func (o *AdoptOptions) setCluster(ctx context.Context, st *store.Store, rt string, id runtimeid.ID) error {
	cluster, err := o.f.ClusterID(rt)
	if err == nil && cluster != "" {
		err = st.SetCluster(ctx, id.String(), cluster)
	}
	if err != nil {
		return fmt.Errorf("adopt %s: %w", id, err)
	}
	return nil
}

type adoptee struct {
	meta metav1.ObjectMeta
	kind string
	obs  monitor.Observation
	seen bool
	tmpl corev1.PodTemplateSpec
}

func (a adoptee) key() string { return a.meta.Namespace + "|" + a.kind + "|" + a.meta.Name }

// state maps what the monitor would observe to the record's state.
func (a adoptee) state() store.State {
	if !a.seen {
		return store.StateStarting
	}
	switch a.obs.Type {
	case store.ContainerStarted:
		return store.StateRunning
	case store.ContainerExited:
		return store.StateExited
	case store.ContainerFailed:
		return store.StateFailed
	case store.ContainerPaused:
		return store.StatePaused
	}
	return store.StateStarting
}

// spec is the spec the creator recorded on the object, checked like a spec
// file and against the object's pod template, or without the annotation
// the little the template itself says. The annotation is untrusted text:
// anyone who can edit the object can write it, and a job is re-created from
// it by start.
func (a adoptee) spec() (spec.ContainerSpec, error) {
	raw, ok := a.meta.Annotations[runtime.AnnotationSpec]
	if !ok {
		s := spec.ContainerSpec{Name: a.meta.Name, Image: firstImage(a.tmpl.Spec.Containers), WorkloadKind: a.kind, RuntimeNamespace: a.meta.Namespace}
		if err := s.Validate(); err != nil {
			return spec.ContainerSpec{}, fmt.Errorf("no %s annotation, and its pod template's %w", runtime.AnnotationSpec, err)
		}
		s.Normalize()
		return s, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("its %s annotation %s (an annotation is text anyone who can edit the %s may write; the pod template is what runs)",
			runtime.AnnotationSpec, fmt.Sprintf(format, args...), a.kind)
	}
	s, err := spec.Parse([]byte(raw))
	if err != nil {
		return spec.ContainerSpec{}, bad("is not a valid spec: %v", err)
	}
	switch {
	case s.Name != a.meta.Name:
		return spec.ContainerSpec{}, bad("names %q", s.Name)
	case s.Kind() != a.kind:
		return spec.ContainerSpec{}, bad("says workloadKind %q", s.Kind())
	case s.RuntimeNamespace != "" && s.RuntimeNamespace != a.meta.Namespace:
		return spec.ContainerSpec{}, bad("says runtimeNamespace %q", s.RuntimeNamespace)
	case s.AllowUnsafeHostPath:
		return spec.ContainerSpec{}, bad("asks for allowUnsafeHostPath, which only your own %s flag may grant", spec.AllowUnsafeHostPathFlag)
	}
	if err := s.Validate(); err != nil {
		return spec.ContainerSpec{}, bad("is not a valid spec: %v", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := runtime.EnsureImage(s); err != nil {
		return spec.ContainerSpec{}, bad("is refused: %v", err)
	}
	diffs, err := runtime.TemplateDiff(s, a.tmpl)
	if err != nil {
		return spec.ContainerSpec{}, bad("cannot be built: %v", err)
	}
	if len(diffs) > 0 {
		return spec.ContainerSpec{}, bad("disagrees with the %s's pod template on %s", a.kind, strings.Join(diffs, ", "))
	}
	s.RuntimeNamespace = a.meta.Namespace
	s.Normalize()
	return s, nil
}

func firstImage(cs []corev1.Container) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].Image
}
