package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
job can run again); records that already know the object are left alone.`,
		Example: `  kubectl gobrave adopt -n team-a
  kubectl gobrave adopt -A --runtime k3s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Adopt from every namespace")
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
		found = append(found, adoptee{meta: d.ObjectMeta, kind: runtimeid.KindDeployment, obs: obs, seen: ok, image: firstImage(d.Spec.Template.Spec.Containers)})
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		obs, ok := runtime.JobEvent(j)
		found = append(found, adoptee{meta: j.ObjectMeta, kind: runtimeid.KindJob, obs: obs, seen: ok, image: firstImage(j.Spec.Template.Spec.Containers)})
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
			known++
			continue
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := time.Now().UTC()
		w := store.Workload{
			RuntimeID: id.String(), Runtime: rtName, Namespace: id.Namespace, Kind: id.Kind, Name: id.Name,
			UID: string(a.meta.UID), Spec: a.spec(), State: a.state(), Message: a.obs.Message,
			CreatedAt: a.meta.CreationTimestamp.UTC(), UpdatedAt: now,
		}
		if err := st.Put(ctx, w, store.Transition{RuntimeID: w.RuntimeID, Type: store.Adopted, UID: w.UID, Message: "adopted from the cluster, " + string(w.State), Time: now}); err != nil {
			errs = append(errs, fmt.Errorf("adopt %s: %w", id, err))
			continue
		}
		adopted++
		fmt.Fprintf(o.Out, "%s adopted (%s, %s)\n", ref(id.Kind, id.Name), id, w.State)
	}
	fmt.Fprintf(o.ErrOut, "adopted %d, already known %d\n", adopted, known)
	return errors.Join(errs...)
}

type adoptee struct {
	meta  metav1.ObjectMeta
	kind  string
	obs   monitor.Observation
	seen  bool
	image string
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

// spec is the spec the creator recorded on the object, or the little the
// object itself says.
func (a adoptee) spec() spec.ContainerSpec {
	var s spec.ContainerSpec
	if raw := a.meta.Annotations[runtime.AnnotationSpec]; raw != "" && json.Unmarshal([]byte(raw), &s) == nil && s.Name == a.meta.Name {
		return s
	}
	return spec.ContainerSpec{Name: a.meta.Name, Image: a.image, WorkloadKind: a.kind, RuntimeNamespace: a.meta.Namespace}
}

func firstImage(cs []corev1.Container) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].Image
}
