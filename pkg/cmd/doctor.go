package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Check is one line of doctor's report (and one object of -o json).
type Check struct {
	Check   string `json:"check"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	// Warning marks a passed check with advice: it does not fail doctor.
	Warning bool `json:"warning,omitempty"`
}

// DoctorOptions are the options of doctor.
type DoctorOptions struct {
	genericiooptions.IOStreams
	f       *Factory
	Output  string
	Timeout time.Duration
}

// NewCmdDoctor automates the specification's troubleshooting checklist.
func NewCmdDoctor(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DoctorOptions{IOStreams: streams, f: f, Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check kubeconfig, API access, RBAC, informer sync and the state database",
		Long: `Run the troubleshooting checklist: the kubeconfig and context of the runtime, API reachability
and server version, RBAC for every verb in the target namespace (SelfSubjectAccessReview),
informer sync of deployments and jobs, the state database's integrity, schema version and file
permissions, and runtime-ID prefixes in the database that no runtime profile knows.
One line per check: ok, warning (advice with a fix; the check passes) or problem with the fix;
exit code 0 only when every check passes. The state database's files are judged as every verb
judges them before opening (see docs/config.md, "The state file").`,
		Example: `  kubectl gobrave doctor
  kubectl gobrave doctor -n team-a --runtime k3s -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(o.Output, "", "json"); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long each cluster check may take")
	return cmd
}

// rbacNeeds lists what the verbs do in the target namespace.
var rbacNeeds = []struct {
	verbs    string // gobrave verbs that need it
	verb     string
	group    string
	resource string
	sub      string
}{
	{"create, run", "create", "apps", "deployments", ""},
	{"create, run, start, restart", "create", "batch", "jobs", ""},
	{"create --expose", "create", "", "services", ""},
	{"monitor, wait, recover, inspect", "list", "apps", "deployments", ""},
	{"monitor, wait, recover, logs -f", "watch", "apps", "deployments", ""},
	{"monitor, wait, recover, start", "list", "batch", "jobs", ""},
	{"monitor, wait, recover, logs -f", "watch", "batch", "jobs", ""},
	{"start, stop, pause, resume", "update", "apps", "deployments", "scale"},
	{"restart", "update", "apps", "deployments", ""},
	{"pause, resume of a job", "update", "batch", "jobs", ""},
	{"start, stop, pause, resume", "get", "apps", "deployments", "scale"},
	{"stop, delete, restart", "delete", "batch", "jobs", ""},
	{"delete", "delete", "apps", "deployments", ""},
	{"delete", "delete", "", "services", ""},
	{"logs, inspect, exec, port-forward of a deployment; monitor, wait, recover (pod reasons)", "list", "apps", "replicasets", ""},
	{"monitor, wait, recover (pod reasons of a deployment); logs -f, port-forward of a deployment", "watch", "apps", "replicasets", ""},
	{"logs, inspect, exec, port-forward; monitor, wait, recover (pod reasons)", "list", "", "pods", ""},
	{"monitor, wait, recover (pod reasons); logs -f, port-forward", "watch", "", "pods", ""},
	{"logs", "get", "", "pods", "log"},
	{"exec", "create", "", "pods", "exec"},
	{"port-forward", "create", "", "pods", "portforward"},
}

// Run runs every check and prints the report.
func (o *DoctorOptions) Run(ctx context.Context) error {
	var checks []Check
	add := func(c Check) { checks = append(checks, c) }

	cfg, _ := o.f.Config() // a bad file was refused before Run
	rtName, err := o.f.Runtime()
	if err != nil {
		return err
	}
	ctxName, _ := o.f.ContextFor(rtName)
	client, ns, kc := o.kubeconfigCheck(rtName, ctxName)
	add(kc)
	if client != nil {
		reach := o.reachability(ctx, client)
		add(reach)
		if reach.OK {
			checks = append(checks, o.rbac(ctx, client, ns)...)
			add(o.informerSync(ctx, client, ns))
		}
	}
	dbChecks, records := o.database(ctx)
	checks = append(checks, dbChecks...)
	if records != nil {
		known := map[string]bool{}
		for _, r := range cfg.ConfiguredRuntimes() {
			known[r] = true
		}
		known[rtName] = true
		var unknown []string
		for r := range records {
			if !known[r] {
				unknown = append(unknown, fmt.Sprintf("%s (%d IDs)", r, records[r]))
			}
		}
		sort.Strings(unknown)
		if len(unknown) == 0 {
			add(Check{Check: "runtime profiles", OK: true, Message: "every runtime-ID prefix in the database has a profile"})
		} else {
			add(Check{Check: "runtime profiles", Message: "runtime-ID prefixes with no profile: " + strings.Join(unknown, ", ") + "; they act through the current context",
				Fix: "add them under runtimes: in the config file (see docs/config.md)"})
		}
	}

	failed := 0
	for _, c := range checks {
		if !c.OK {
			failed++
		}
	}
	if o.Output == "json" {
		if err := printData(o.Out, "json", checks); err != nil {
			return err
		}
	} else {
		tw := printers.GetNewTabWriter(o.Out)
		for _, c := range checks {
			status := "ok"
			switch {
			case !c.OK:
				status = "problem"
			case c.Warning:
				status = "warning"
			}
			line := fmt.Sprintf("%s\t%s\t%s", status, c.Check, c.Message)
			if c.Fix != "" {
				line += " (fix: " + c.Fix + ")"
			}
			fmt.Fprintln(tw, escapeTerminal(line))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor found %d problem(s) in %d checks", failed, len(checks))
	}
	return nil
}

func (o *DoctorOptions) kubeconfigCheck(rtName, ctxName string) (kubernetes.Interface, string, Check) {
	c := Check{Check: "kubeconfig"}
	ns, err := o.f.Namespace(rtName, "")
	if err != nil {
		c.Message, c.Fix = err.Error(), "check the config file"
		return nil, "", c
	}
	if o.f.NewClient == nil {
		raw, err := o.f.flagsFor(ctxName).ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			c.Message, c.Fix = err.Error(), "check --kubeconfig and $KUBECONFIG"
			return nil, ns, c
		}
		name := ctxName
		if name == "" {
			name = raw.CurrentContext
		}
		if _, ok := raw.Contexts[name]; !ok || name == "" {
			c.Message = fmt.Sprintf("context %q of runtime %s is not in the kubeconfig", name, rtName)
			c.Fix = "pick one of 'kubectl config get-contexts' with --context or in the runtime profile"
			return nil, ns, c
		}
		ctxName = name
	}
	client, err := o.f.Client(rtName)
	if err != nil {
		c.Message, c.Fix = err.Error(), "check --kubeconfig, $KUBECONFIG and --context"
		return nil, ns, c
	}
	c.OK = true
	c.Message = fmt.Sprintf("runtime %s uses context %q, namespace %q", rtName, ctxName, ns)
	return client, ns, c
}

func (o *DoctorOptions) reachability(ctx context.Context, client kubernetes.Interface) Check {
	c := Check{Check: "api server"}
	v, err := serverVersion(ctx, client, o.Timeout)
	if err != nil {
		c.Message, c.Fix = "unreachable: "+err.Error(), "check the cluster is up, the kubeconfig's server address and --request-timeout"
		return c
	}
	c.OK, c.Message = true, "reachable, server version "+v
	return c
}

func (o *DoctorOptions) rbac(ctx context.Context, client kubernetes.Interface, ns string) []Check {
	var out []Check
	for _, n := range rbacNeeds {
		what := n.resource
		if n.sub != "" {
			what += "/" + n.sub
		}
		c := Check{Check: "rbac " + n.verb + " " + what}
		rctx, cancel := context.WithTimeout(ctx, o.Timeout)
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(rctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: ns, Verb: n.verb, Group: n.group, Resource: n.resource, Subresource: n.sub,
			}},
		}, metav1.CreateOptions{})
		cancel()
		switch {
		case err != nil:
			c.Message, c.Fix = "cannot ask the API server: "+err.Error(), "check the cluster is reachable"
		case res.Status.Allowed:
			c.OK, c.Message = true, fmt.Sprintf("allowed in namespace %q", ns)
		default:
			c.Message = fmt.Sprintf("forbidden in namespace %q: %s need it", ns, n.verbs)
			c.Fix = "bind a Role like docs/rbac.yaml in that namespace"
		}
		out = append(out, c)
	}
	return out
}

func (o *DoctorOptions) informerSync(ctx context.Context, client kubernetes.Interface, ns string) Check {
	c := Check{Check: "informer sync"}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = runtime.LabelWorkload }))
	deps := factory.Apps().V1().Deployments().Informer()
	jobs := factory.Batch().V1().Jobs().Informer()
	var watchErr error
	for _, inf := range []cache.SharedIndexInformer{deps, jobs} {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if watchErr == nil {
				watchErr = err
				cancel()
			}
		})
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // stop the informers before waiting for them
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), deps.HasSynced, jobs.HasSynced) {
		c.Message = fmt.Sprintf("deployment and job informers did not sync in namespace %q within %s", ns, o.Timeout)
		if watchErr != nil {
			c.Message += ": " + watchErr.Error()
		}
		c.Fix = fmt.Sprintf("check 'kubectl auth can-i list jobs -n %s' and the API server's health", ns)
		return c
	}
	c.OK = true
	c.Message = fmt.Sprintf("synced %d deployments and %d jobs labelled %s in namespace %q in %s",
		len(deps.GetStore().List()), len(jobs.GetStore().List()), runtime.LabelWorkload, ns, time.Since(start).Round(time.Millisecond))
	return c
}

// database checks the state database and counts records per runtime prefix.
func (o *DoctorOptions) database(ctx context.Context) ([]Check, map[string]int) {
	path, err := o.f.StatePath()
	if err != nil {
		return []Check{{Check: "state database", Message: err.Error(), Fix: "set HOME or GOBRAVE_HOME, or pass --state-db"}}, nil
	}
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return []Check{{Check: "state database", OK: true, Message: path + " does not exist yet; the first create makes it"}}, map[string]int{}
	}
	out := fileChecks(path)
	for _, c := range out {
		if !c.OK {
			return out, nil // the store refuses it, for the reason already given
		}
	}
	st, err := o.f.Store(ctx)
	if err != nil {
		return append(out, Check{Check: "state database", Message: err.Error(), Fix: "move the file aside or point --state-db elsewhere"}), nil
	}
	if v, err := st.SchemaVersion(ctx); err != nil || v != store.SchemaLatest() {
		out = append(out, Check{Check: "schema version", Message: fmt.Sprintf("schema %d, this binary writes %d (%v)", v, store.SchemaLatest(), err)})
	} else {
		out = append(out, Check{Check: "schema version", OK: true, Message: fmt.Sprintf("schema %d", v)})
	}
	if err := st.IntegrityCheck(ctx); err != nil {
		out = append(out, Check{Check: "database integrity", Message: err.Error(), Fix: "move the file aside; 'kubectl gobrave adopt' re-imports what the cluster still has"})
	} else {
		out = append(out, Check{Check: "database integrity", OK: true, Message: "PRAGMA integrity_check ok"})
	}
	ws, err := st.List(ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		return append(out, Check{Check: "state database", Message: err.Error()}), nil
	}
	counts := map[string]int{}
	for _, w := range ws {
		counts[w.Runtime]++
	}
	return out, counts
}

// fileChecks judges the state database's folder and files as store.Open
// does: a folder, database, -wal or -shm that another user can change is a
// problem (Open refuses it), and so is a file others can read. A folder
// others can read is only a warning: the files' own modes keep them private.
func fileChecks(path string) []Check {
	dir := filepath.Dir(path)
	folder := Check{Check: "state folder", OK: true}
	files := Check{Check: "database permissions", OK: true}
	var problems, fixes, judged []string
	for _, fd := range store.CheckFiles(path) {
		if fd.Path == dir {
			fi, err := os.Stat(dir)
			switch {
			case fd.Problem != "":
				folder.OK, folder.Message, folder.Fix = false, fd.Problem, fd.Fix
			case err == nil && fi.Mode().Perm()&0o077 != 0:
				folder.Warning = true
				folder.Message = fmt.Sprintf("%s is %v: other users can list it, not read the database, whose own mode keeps it private", dir, fi.Mode().Perm())
				folder.Fix = "chmod 700 " + dir
			case err == nil:
				folder.Message = fmt.Sprintf("%s is %v", dir, fi.Mode().Perm())
			}
			continue
		}
		if fd.Problem != "" {
			problems, fixes = append(problems, fd.Problem), append(fixes, fd.Fix)
			continue
		}
		if fi, err := os.Lstat(fd.Path); err == nil {
			judged = append(judged, fmt.Sprintf("%s %v", filepath.Base(fd.Path), fi.Mode().Perm()))
		}
	}
	if len(problems) > 0 {
		files.OK, files.Message, files.Fix = false, strings.Join(problems, "; "), strings.Join(fixes, "; ")
	} else {
		files.Message = strings.Join(judged, ", ") + ", owned by you"
	}
	var out []Check
	if folder.Message != "" {
		out = append(out, folder)
	}
	return append(out, files)
}
