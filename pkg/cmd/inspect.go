package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// InspectView is the stable JSON/YAML form of inspect.
type InspectView struct {
	WorkloadView
	IPAddress string `json:"ipAddress"`
	NodeName  string `json:"nodeName"`
	PodName   string `json:"podName"`
	PodPhase  string `json:"podPhase"`
	Image     string `json:"image"`
	Ready     bool   `json:"ready"`
	Restarts  int32  `json:"restarts"`
	// PodReason and PodMessage say why the newest pod does not run now (a
	// container's waiting reason, or Unschedulable).
	PodReason  string `json:"podReason"`
	PodMessage string `json:"podMessage"`
	// LastTermination is how a container of the newest pod last ended: a
	// crash-looping container's last exit code and reason.
	LastTermination *runtime.Termination `json:"lastTermination"`
	// InCluster is false when the workload object no longer exists.
	InCluster bool `json:"inCluster"`
}

// InspectOptions are the options of inspect.
type InspectOptions struct {
	genericiooptions.IOStreams
	f *Factory
	printFlags
	arg  string
	tmpl *objPrinter
}

// NewCmdInspect shows a workload's record and what the cluster says of it.
func NewCmdInspect(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &InspectOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "inspect ID",
		Short: "Show a workload's record, address, node and pod",
		Long: `Show a workload's record from the state database with what the cluster says now: for a
deployment with a Service, the address is the Service's DNS name <name>-svc.<namespace>.svc.cluster.local;
otherwise the newest pod's IP. Node, pod, phase, image, readiness and restarts come from the newest pod
owned by the workload (the Job's, or a ReplicaSet's of the Deployment; labels alone do not count), with
why it does not run (a waiting reason such as ImagePullBackOff or CrashLoopBackOff, or Unschedulable)
and how its container last ended (exit code and reason).`,
		Example: `  kubectl gobrave inspect web
  kubectl gobrave inspect k8s-default|job|import -o json
  kubectl gobrave inspect web -o jsonpath='{.podName}{" "}{.nodeName}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.arg = args[0]
			if err := validateOutputs(o.Output, "", "json", "yaml"); err != nil {
				return err
			}
			if err := ParseRef(o.arg); err != nil {
				return err
			}
			if isTemplate(o.Output) {
				p, err := newObjPrinter(o.Output)
				if err != nil {
					return err
				}
				o.tmpl = p
			}
			return o.Run(cmd.Context())
		},
	}
	o.printFlags.addFlags(cmd, "json, yaml", false)
	return cmd
}

// Run inspects the workload.
func (o *InspectOptions) Run(ctx context.Context) error {
	_, ws, err := o.f.resolveAll(ctx, []string{o.arg})
	if err != nil {
		return err
	}
	w := ws[0]
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return err
	}
	client, err := o.f.Client(id.Runtime)
	if err != nil {
		return err
	}
	info, err := runtime.New(client, id.Runtime).Inspect(ctx, id, w.UID)
	if err != nil {
		return err
	}
	v := InspectView{
		WorkloadView: viewOf(w), IPAddress: info.IPAddress, NodeName: info.NodeName, PodName: info.PodName,
		PodPhase: info.PodPhase, Image: info.Image, Ready: info.Ready, Restarts: info.Restarts, InCluster: info.Exists,
		PodReason: info.PodReason, PodMessage: info.PodMessage, LastTermination: info.LastTermination,
	}
	if v.Image == "" {
		v.Image = w.Spec.Image
	}
	if o.tmpl != nil {
		m, err := toObject(v)
		if err != nil {
			return err
		}
		return o.tmpl.print(o.Out, m, []map[string]any{m}, false)
	}
	if o.Output != "" {
		return printData(o.Out, o.Output, v)
	}
	tw := printers.GetNewTabWriter(o.Out)
	row := func(k, val string) {
		if val == "" {
			val = "<none>"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", k, escapeTerminal(val))
	}
	row("Runtime ID", v.RuntimeID)
	row("Runtime", v.Runtime)
	row("Namespace", v.Namespace)
	row("Kind", v.Kind)
	row("Name", v.Name)
	row("UID", v.UID)
	row("State", v.State)
	row("Reason", v.Reason)
	row("Exit code", strings.TrimPrefix(exitCodeText(v.ExitCode), "<none>"))
	row("Message", v.Message)
	if v.StartedAt != nil {
		row("Started", v.StartedAt.Format(time.RFC3339))
	}
	if v.FinishedAt != nil {
		row("Finished", v.FinishedAt.Format(time.RFC3339))
	}
	row("Created", v.CreatedAt.Format(time.RFC3339))
	row("Updated", v.UpdatedAt.Format(time.RFC3339))
	row("In cluster", fmt.Sprint(v.InCluster))
	row("IP address", v.IPAddress)
	row("Node", v.NodeName)
	row("Pod", v.PodName)
	row("Pod phase", v.PodPhase)
	row("Image", v.Image)
	row("Ready", fmt.Sprint(v.Ready))
	row("Restarts", fmt.Sprint(v.Restarts))
	if v.PodReason != "" {
		row("Pod reason", v.PodReason+": "+v.PodMessage)
	}
	if t := v.LastTermination; t != nil {
		last := fmt.Sprintf("exit code %d", t.ExitCode)
		if t.Reason != "" {
			last += " (" + t.Reason + ")"
		}
		if !t.FinishedAt.IsZero() {
			last += " at " + t.FinishedAt.UTC().Format(time.RFC3339)
		}
		row("Last termination", last)
	}
	if len(w.Spec.Command) > 0 || len(w.Spec.Entrypoint) > 0 {
		row("Command", strings.Join(append(append([]string{}, w.Spec.Entrypoint...), w.Spec.Command...), " "))
	}
	return tw.Flush()
}
