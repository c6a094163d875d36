package cmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/lifecycle"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// specFlags are the ContainerSpec flags of create and run. Zero values mean
// "not given", so they override a spec file only where set.
type specFlags struct {
	File        string
	Image       string
	Kind        string
	Entrypoint  []string
	WorkDir     string
	Env         []string
	EnvSecrets  []string
	EnvFrom     []string
	Profile     string
	AllowUnsafe bool
	CPU         float64
	Memory      string
	Volumes     []string
	User        string
	Port        int32
	Expose      optionalBool
	Labels      []string
	PullPolicy  string
	Constraints []string
	Deadline    durationText
}

func (s *specFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&s.File, "filename", "f", s.File, "Spec file (YAML or JSON, see docs/spec.example.yaml); flags override its values")
	fs.StringVar(&s.Image, "image", s.Image, "Container image (required unless the spec file sets it)")
	fs.StringVar(&s.Kind, "kind", s.Kind, "Workload kind: deployment (a service, the default) or job (a task)")
	fs.StringArrayVar(&s.Entrypoint, "entrypoint", s.Entrypoint, "Replace the image's entrypoint (repeat for each word: --entrypoint /bin/sh --entrypoint -c)")
	fs.StringVar(&s.WorkDir, "workdir", s.WorkDir, "Working directory inside the container")
	fs.StringArrayVarP(&s.Env, "env", "e", s.Env, "Environment variable KEY=VALUE (repeatable). The value is stored in plain text in the state database and the workload's gobrave.dev/spec annotation (readable by anyone who can read the namespace's Deployments and Jobs): pass secrets with --env-secret or --env-from-secret")
	fs.StringArrayVar(&s.EnvSecrets, "env-secret", s.EnvSecrets, "Environment variable NAME=SECRET/KEY read from key KEY of the Secret SECRET in the workload's namespace (a secretKeyRef; only the reference is stored) (repeatable)")
	fs.StringArrayVar(&s.EnvFrom, "env-from-secret", s.EnvFrom, "Secret in the workload's namespace whose every key becomes an environment variable (envFrom) (repeatable)")
	fs.StringVar(&s.Profile, "security-profile", s.Profile, "Pod Security Standard the pod passes: baseline (the default) or restricted (runAsNonRoot, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault; pass --user UID if the image runs as root)")
	fs.BoolVar(&s.AllowUnsafe, "allow-unsafe-host-path", s.AllowUnsafe, "Allow a --volume of the node's / or of a container runtime's socket (or a folder holding one), which hands the node to the container")
	fs.Float64Var(&s.CPU, "cpu", s.CPU, "CPU limit and request in cores, e.g. 0.5")
	fs.StringVar(&s.Memory, "memory", s.Memory, "Memory limit and request: bytes or a quantity such as 256Mi")
	fs.StringArrayVar(&s.Volumes, "volume", s.Volumes, "hostPath mount SRC:DST[:ro], both absolute; :ro mounts it read-only (repeatable)")
	fs.StringVar(&s.User, "user", s.User, "Run as numeric UID or UID:GID")
	fs.Int32Var(&s.Port, "port", s.Port, "Container port to expose (1-65535)")
	fs.Var(&s.Expose, "expose", "Create a ClusterIP Service <name>-svc for --port (deployments only)")
	fs.Lookup("expose").NoOptDefVal = "true"
	fs.StringArrayVarP(&s.Labels, "label", "l", s.Labels, "Label KEY=VALUE for the workload, its pods and service (repeatable)")
	fs.StringVar(&s.PullPolicy, "pull-policy", s.PullPolicy, "Image pull policy: Always or IfNotPresent (default IfNotPresent; Never is refused)")
	fs.Var(&s.Deadline, "progress-deadline", "How long (whole seconds, e.g. 90s or 10m) a service's rollout may make no progress before it fails with ProgressDeadlineExceeded (deployments only; default 600s)")
	fs.StringArrayVar(&s.Constraints, "node-constraint", s.Constraints, "Node affinity 'KEY OP [V1,V2]', OP one of In, NotIn, Exists, DoesNotExist, Gt, Lt; KEY hostname means kubernetes.io/hostname (repeatable)")
}

// build merges the spec file (if any), the flags, the name and the command
// into a spec and validates it. Pure apart from reading the file.
func (s *specFlags) build(name string, command []string) (spec.ContainerSpec, error) {
	var cs spec.ContainerSpec
	if s.File != "" {
		var err error
		if cs, err = spec.LoadFile(s.File); err != nil {
			if !errors.Is(err, spec.ErrInvalid) {
				// Missing or unreadable: still bad input, found before any API call.
				err = fmt.Errorf("%w: %w (check --filename)", ErrUsage, err)
			}
			return cs, err
		}
	}
	if name != "" {
		cs.Name = name
	}
	if cs.Name == "" {
		return cs, usageErrorf("a NAME is required: 'kubectl gobrave create NAME --image IMAGE' or set name in the spec file")
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cs.Image, s.Image)
	set(&cs.WorkloadKind, s.Kind)
	set(&cs.WorkDir, s.WorkDir)
	set(&cs.User, s.User)
	set(&cs.PullPolicy, s.PullPolicy)
	set(&cs.SecurityProfile, s.Profile)
	if s.AllowUnsafe {
		cs.AllowUnsafeHostPath = true
	}
	set(&cs.ProgressDeadline, string(s.Deadline))
	if s.Memory != "" {
		cs.Memory = spec.Quantity(s.Memory)
	}
	if len(s.Entrypoint) > 0 {
		cs.Entrypoint = s.Entrypoint
	}
	if len(command) > 0 {
		cs.Command = command
	}
	if s.CPU != 0 {
		cs.CPU = s.CPU
	}
	if s.Port != 0 {
		cs.ExposedPort = s.Port
	}
	if s.Expose.set {
		cs.ExposeService = s.Expose.value
	}
	var errs []error
	for _, kv := range s.Env {
		k, v, err := spec.ParseKeyValue("env", kv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cs.Env == nil {
			cs.Env = map[string]string{}
		}
		cs.Env[k] = v
	}
	for _, v := range s.EnvSecrets {
		es, err := spec.ParseEnvSecret(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs.EnvSecrets = append(cs.EnvSecrets, es)
	}
	cs.EnvFromSecrets = append(cs.EnvFromSecrets, s.EnvFrom...)
	for _, kv := range s.Labels {
		k, v, err := spec.ParseKeyValue("label", kv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cs.Labels == nil {
			cs.Labels = map[string]string{}
		}
		cs.Labels[k] = v
	}
	for _, v := range s.Volumes {
		vol, err := spec.ParseVolume(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs.Volumes = append(cs.Volumes, vol)
	}
	for _, c := range s.Constraints {
		sc, err := spec.ParseConstraint(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs.SchedulingConstraints = append(cs.SchedulingConstraints, sc)
	}
	if err := errors.Join(errs...); err != nil {
		return cs, err
	}
	if err := cs.Validate(); err != nil {
		return cs, err
	}
	if err := runtime.EnsureImage(cs); err != nil {
		return cs, err
	}
	cs.Normalize()
	return cs, nil
}

// optionalBool is a bool flag that remembers whether it was given.
type optionalBool struct{ set, value bool }

func (b *optionalBool) String() string { return strconv.FormatBool(b.value) }
func (b *optionalBool) Type() string   { return "bool" }
func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not a boolean", s)
	}
	b.set, b.value = true, v
	return nil
}

// durationText is a duration flag kept as written: the spec validates it
// (positive, whole seconds) with the same message as in a spec file.
type durationText string

func (d *durationText) String() string     { return string(*d) }
func (d *durationText) Type() string       { return "duration" }
func (d *durationText) Set(s string) error { *d = durationText(s); return nil }

// CreateOptions are the options of create.
type CreateOptions struct {
	genericiooptions.IOStreams
	f      *Factory
	flags  specFlags
	Output string
	// DryRun is none (or ""), client or server.
	DryRun string

	name    string
	command []string
	spec    spec.ContainerSpec
}

// NewCmdCreate creates a workload and records its runtime ID.
func NewCmdCreate(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CreateOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "create NAME --image IMAGE [flags] [-- COMMAND [ARGS...]]",
		Short: "Create a service (Deployment) or a task (Job) and print its runtime ID",
		Long: `Create a service (a Deployment with one replica, plus a ClusterIP Service <name>-svc with
--port and --expose) or a task (a Job, --kind job) and record it in the state database.
On success the runtime ID alone is printed on stdout, so id=$(kubectl gobrave create ...) works.`,
		Example: `  # A web service with a ClusterIP Service web-svc
  kubectl gobrave create web --image nginx:1.27 --port 80 --expose

  # A batch task with an environment and limits
  id=$(kubectl gobrave create import --kind job --image busybox --env MODE=full --cpu 0.5 --memory 256Mi -- sh -c 'echo hi')

  # A password from a Secret (only the reference is stored), in a namespace enforcing restricted
  kubectl gobrave create migrate --kind job --image migrate:1 --env-secret DB_PASSWORD=db-creds/password --security-profile restricted --user 1000

  # From a spec file, overriding its image
  kubectl gobrave create -f web.yaml --image nginx:1.28 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			_, err := o.Run(cmd.Context())
			return err
		},
	}
	o.flags.addFlags(cmd.Flags())
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml prints the record instead of the ID (with --dry-run: the objects; name: their resource/name)")
	addDryRunFlag(cmd, &o.DryRun)
	return cmd
}

// addDryRunFlag adds --dry-run to create and run.
func addDryRunFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "dry-run", "none", `Must be "none", "client" or "server". client: print the objects that would be sent, sending nothing. server: send them with dryRun=All so that admission (Pod Security, quotas, webhooks) answers, and check a pod of the template; nothing is created. Either way nothing is recorded. With -o yaml|json the objects are printed (a v1 List when there are two)`)
}

// validateDryRun checks a --dry-run value.
func validateDryRun(v string) error {
	switch v {
	case "", dryRunNone, dryRunClient, dryRunServer:
		return nil
	}
	return usageErrorf("--dry-run %q: must be none, client or server", v)
}

// --dry-run values, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// dryRun prints the objects the spec becomes; with --dry-run=server the API
// server admits them (and a pod of their template) first. Nothing is
// created, and the state database is not opened.
func (o *CreateOptions) dryRun(ctx context.Context) error {
	rtName, err := o.f.Runtime()
	if err != nil {
		return err
	}
	ns, err := o.f.Namespace(rtName, o.spec.RuntimeNamespace)
	if err != nil {
		return err
	}
	id, err := runtimeid.New(rtName, ns, o.spec.Kind(), o.spec.Name)
	if err != nil {
		return err
	}
	objs, err := runtime.Build(o.spec, ns)
	if err != nil {
		return err
	}
	suffix := "(dry run)"
	if o.DryRun == dryRunServer {
		suffix = "(server dry run)"
		client, err := o.f.Client(rtName)
		if err != nil {
			return err
		}
		// Pod Security only warns about a Deployment or a Job: ask about a
		// pod of their template, as create does.
		if err := runtime.CheckPods(ctx, client, ns, o.spec, objs, id.Kind); err != nil {
			return err
		}
		if objs, err = runtime.DryRun(ctx, client, ns, objs); err != nil {
			return err
		}
	}
	items := objs.Items()
	switch o.Output {
	case "json", "yaml":
		if len(items) == 1 {
			return printData(o.Out, o.Output, items[0])
		}
		return printData(o.Out, o.Output, objectList{APIVersion: "v1", Kind: "List", Items: items, Metadata: map[string]string{"resourceVersion": ""}})
	}
	for _, obj := range items {
		name := objectRef(obj)
		if o.Output == "name" {
			fmt.Fprintln(o.Out, name)
			continue
		}
		fmt.Fprintf(o.Out, "%s created %s\n", name, suffix)
	}
	return nil
}

// objectList is kubectl's v1 List, as kubectl get -o yaml prints several objects.
type objectList struct {
	APIVersion string              `json:"apiVersion"`
	Items      []k8sruntime.Object `json:"items"`
	Kind       string              `json:"kind"`
	Metadata   map[string]string   `json:"metadata"`
}

// objectRef is kubectl's resource.group/name of an object built by Build.
func objectRef(obj k8sruntime.Object) string {
	gvk := obj.GetObjectKind().GroupVersionKind()
	name := ""
	if m, ok := obj.(interface{ GetName() string }); ok {
		name = m.GetName()
	}
	res := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		res += "." + gvk.Group
	}
	return res + "/" + name
}

// splitArgs separates NAME from the command after "--".
func splitArgs(cmd *cobra.Command, args []string) (name string, command []string, err error) {
	dash := cmd.ArgsLenAtDash()
	before := args
	if dash >= 0 {
		before, command = args[:dash], args[dash:]
	}
	switch len(before) {
	case 0:
	case 1:
		name = before[0]
	default:
		return "", nil, usageErrorf("expected one NAME, got %q (put the container command after --)", before)
	}
	return name, command, nil
}

// Complete reads the arguments.
func (o *CreateOptions) Complete(cmd *cobra.Command, args []string) error {
	var err error
	o.name, o.command, err = splitArgs(cmd, args)
	return err
}

// Validate builds and checks the spec; nothing touches the cluster or the database.
func (o *CreateOptions) Validate() error {
	if err := validateDryRun(o.DryRun); err != nil {
		return err
	}
	if err := validateOutput(o.Output, "", "json", "yaml", "name"); err != nil {
		return err
	}
	var err error
	o.spec, err = o.flags.build(o.name, o.command)
	return err
}

// Run creates the workload and records it.
func (o *CreateOptions) Run(ctx context.Context) (store.Workload, error) {
	if o.dryRunning() {
		return store.Workload{}, o.dryRun(ctx)
	}
	w, err := o.f.create(ctx, o.spec)
	if err != nil {
		return w, err
	}
	if o.Output == "json" || o.Output == "yaml" {
		return w, printData(o.Out, o.Output, viewOf(w))
	}
	fmt.Fprintln(o.Out, w.RuntimeID)
	return w, nil
}

// dryRunning reports whether --dry-run is client or server.
func (o *CreateOptions) dryRunning() bool {
	return o.DryRun == dryRunClient || o.DryRun == dryRunServer
}

// create records the intent and creates s in the cluster through the
// lifecycle engine: a failed create leaves neither objects nor a record.
func (f *Factory) create(ctx context.Context, s spec.ContainerSpec) (store.Workload, error) {
	rtName, err := f.Runtime()
	if err != nil {
		return store.Workload{}, err
	}
	ns, err := f.Namespace(rtName, s.RuntimeNamespace)
	if err != nil {
		return store.Workload{}, err
	}
	id, err := runtimeid.New(rtName, ns, s.Kind(), s.Name)
	if err != nil {
		return store.Workload{}, err
	}
	e, err := f.engine(ctx)
	if err != nil {
		return store.Workload{}, err
	}
	if err := f.refuseOtherKind(ctx, e.Store, id); err != nil {
		return store.Workload{}, err
	}
	w, _, err := e.Create(ctx, rtName, ns, s)
	return w, err
}

// engine returns the lifecycle engine over the store and the clients.
func (f *Factory) engine(ctx context.Context) (*lifecycle.Engine, error) {
	st, err := f.Store(ctx)
	if err != nil {
		return nil, err
	}
	return &lifecycle.Engine{Store: st, Client: f.Client, Cluster: f.ClusterID, Owner: owner(), LockWait: lifecycle.DefaultLockWait,
		SyncTimeout: f.requestTimeout()}, nil
}

// refuseOtherKind refuses to create id while the database holds a record of
// the other kind with its namespace and name that is not deleted, on the same
// kubeconfig context: a deployment and a job of one name share the
// gobrave-workload label. It reads only the database.
func (f *Factory) refuseOtherKind(ctx context.Context, st *store.Store, id runtimeid.ID) error {
	ws, err := st.List(ctx, store.Filter{All: true, Namespace: id.Namespace, Name: id.Name, NoSpec: true})
	if err != nil {
		return err
	}
	want, err := f.ContextFor(id.Runtime)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Kind == id.Kind || w.State == store.StateDeleted {
			continue
		}
		if got, err := f.ContextFor(w.Runtime); err == nil && got != want {
			continue // another cluster
		}
		return usageErrorf("create %s: %s (%s) has the same name in namespace %s, and a deployment and a job of one name cannot live side by side: delete it first with 'kubectl gobrave delete \"%s\"' or choose another name",
			id, w.RuntimeID, w.State, id.Namespace, w.RuntimeID)
	}
	return nil
}
