package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd/api"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Shell completion. kubectl (1.26 and later) completes a plugin's arguments by
// running kubectl_complete-gobrave from PATH (hack/completion/), which calls
// `kubectl gobrave __complete ARGS...`; cobra answers with the functions below.
// They never make an API call for an ID, never create the state database and
// never print an error: a failure is ShellCompDirectiveError, nothing more.

const (
	// completeIDs is what ID completions end with: no file names, and the
	// order given (non-terminal workloads first) kept.
	completeIDs = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	// completeFailed tells the shell there is nothing to offer.
	completeFailed = cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp

	// Completion must answer while the user waits at a prompt.
	storeCompletionTimeout     = 3 * time.Second
	namespaceCompletionTimeout = 5 * time.Second
)

// idCompletion says which records a verb's arguments are completed from.
type idCompletion struct {
	// terminal lists the terminal states also offered, after the others.
	terminal []store.State
	// single: the verb takes one ID (later arguments get nothing).
	single bool
}

// idVerbs are the verbs whose arguments are IDs.
var idVerbs = map[string]idCompletion{
	// start runs a finished or deleted job again from its recorded spec.
	verbStart.name:  {terminal: []store.State{store.StateExited, store.StateFailed, store.StateDeleted}},
	verbStop.name:   {},
	verbPause.name:  {},
	verbResume.name: {},
	// restart runs a finished or stopped job again, restarts an exited
	// deployment.
	verbRestart.name: {terminal: []store.State{store.StateExited, store.StateFailed, store.StateDeleted}},
	// A deleted record has nothing left to delete.
	verbDelete.name: {terminal: []store.State{store.StateExited, store.StateFailed}},
	// logs takes many IDs; a finished job's log is worth reading.
	"logs":         {terminal: []store.State{store.StateExited, store.StateFailed}},
	"port-forward": {single: true},
	"inspect":      {single: true},
	"events":       {},
	"monitor":      {},
	"wait":         {},
	"exec":         {single: true},
}

// registerCompletion enables cobra's completion command with help that reads
// "kubectl gobrave" and adds the completion functions of IDs and flags.
func registerCompletion(f *Factory, root *cobra.Command) {
	root.CompletionOptions.DisableDefaultCmd = false
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			describeCompletionCmd(c)
		}
		ic, ok := idVerbs[c.Name()]
		if ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeWorkloads(f, ic)
		}
	}
	if c, _, err := root.Find([]string{"wait"}); err == nil && c.Flag("for") != nil {
		_ = c.RegisterFlagCompletionFunc("for", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			out := make([]string, len(Conditions))
			for i, cond := range Conditions {
				out[i] = string(cond)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		})
	}
	// Errors here can only mean a flag is missing or registered twice: the
	// completion is then simply absent.
	for _, c := range root.Commands() {
		if c.Flag("kind") != nil && c.Flag("selector") != nil {
			_ = c.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{"deployment", "job"}, cobra.ShellCompDirectiveNoFileComp))
			states := make([]string, len(allStates))
			for i, s := range allStates {
				states[i] = string(s)
			}
			_ = c.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(states, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	_ = root.RegisterFlagCompletionFunc("namespace", completeNamespaces(f))
	_ = root.RegisterFlagCompletionFunc("context", completeKubeconfig(f, func(c api.Config) map[string]string {
		out := map[string]string{}
		for name, kc := range c.Contexts {
			out[name] = "cluster " + kc.Cluster
		}
		return out
	}))
	_ = root.RegisterFlagCompletionFunc("cluster", completeKubeconfig(f, func(c api.Config) map[string]string {
		out := map[string]string{}
		for name, cl := range c.Clusters {
			out[name] = cl.Server
		}
		return out
	}))
	_ = root.RegisterFlagCompletionFunc("user", completeKubeconfig(f, func(c api.Config) map[string]string {
		out := map[string]string{}
		for name := range c.AuthInfos {
			out[name] = ""
		}
		return out
	}))
	_ = root.RegisterFlagCompletionFunc("runtime", cobra.FixedCompletions(runtimeid.Runtimes, cobra.ShellCompDirectiveNoFileComp))
}

// completeWorkloads offers the runtime IDs in the state database and the bare
// names that resolve (exactly one record has them): non-terminal workloads
// first, then those in ic.terminal. Arguments already given are left out.
func completeWorkloads(f *Factory, ic idCompletion) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if ic.single && len(args) > 0 {
			// A second ID for a one-ID verb, or exec's command after the ID.
			// (ArgsLenAtDash cannot tell: cobra parses the flags twice when
			// completing, once with a "--" appended.)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if path, err := f.StatePath(); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		} else if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			// Nothing recorded yet; completing must not create the database.
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), storeCompletionTimeout)
		defer cancel()
		st, err := f.Store(ctx)
		if err != nil {
			cobra.CompDebugln("gobrave: "+err.Error(), false)
			return nil, completeFailed
		}
		all, err := st.List(ctx, store.Filter{All: true, NoSpec: true})
		if err != nil {
			cobra.CompDebugln("gobrave: "+err.Error(), false)
			return nil, completeFailed
		}
		return workloadCompletions(all, ic.terminal, args, toComplete), completeIDs
	}
}

// workloadCompletions is the pure part of completeWorkloads: every record
// that is non-terminal, then every record in one of the terminal states, each
// as its bare name (when unique among all records) and its runtime ID, with
// the state as description; given arguments and other prefixes left out.
func workloadCompletions(all []store.Workload, terminal []store.State, given []string, prefix string) []string {
	names := map[string]int{}
	for _, w := range all {
		names[w.Name]++
	}
	skip := map[string]bool{}
	for _, g := range given {
		skip[g] = true
	}
	var first, last []string
	for _, w := range all {
		if skip[w.RuntimeID] || skip[w.Name] && names[w.Name] == 1 {
			continue
		}
		out := &first
		if w.State.Terminal() {
			if !slices.Contains(terminal, w.State) {
				continue
			}
			out = &last
		}
		if names[w.Name] == 1 && strings.HasPrefix(w.Name, prefix) {
			*out = append(*out, fmt.Sprintf("%s\t%s, %s", w.Name, w.State, w.RuntimeID))
		}
		if strings.HasPrefix(w.RuntimeID, prefix) {
			*out = append(*out, fmt.Sprintf("%s\t%s", w.RuntimeID, w.State))
		}
	}
	return append(first, last...)
}

// completeNamespaces lists the namespaces of the context in use, as kubectl
// does: one API call with a short timeout.
func completeNamespaces(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		rt, err := f.Runtime()
		if err != nil {
			return nil, completeFailed
		}
		client, err := f.Client(rt)
		if err != nil {
			cobra.CompDebugln("gobrave: "+err.Error(), false)
			return nil, completeFailed
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), namespaceCompletionTimeout)
		defer cancel()
		list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			cobra.CompDebugln("gobrave: "+err.Error(), false)
			return nil, completeFailed
		}
		var out []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeKubeconfig offers the names pick takes from the kubeconfig file
// (contexts, clusters, users), with their descriptions; no API call.
func completeKubeconfig(f *Factory, pick func(api.Config) map[string]string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		raw, err := f.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			cobra.CompDebugln("gobrave: "+err.Error(), false)
			return nil, completeFailed
		}
		var out []string
		for name, desc := range pick(raw) {
			if !strings.HasPrefix(name, toComplete) {
				continue
			}
			if desc != "" {
				name += "\t" + desc
			}
			out = append(out, name)
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// describeCompletionCmd rewrites the help of cobra's completion command, which
// names the program by the root's name alone ("gobrave").
func describeCompletionCmd(c *cobra.Command) {
	c.Short = "Generate the shell completion script (for kubectl gobrave: see kubectl_complete-gobrave)"
	// Runnable, so that an unknown shell is a usage error (exit 2) rather
	// than cobra's help with exit 0.
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	c.Long = `Generate the autocompletion script of kubectl gobrave for the specified shell.

'kubectl gobrave <TAB>' is completed by kubectl itself (kubectl 1.26 and later, with kubectl's own
completion loaded, e.g. source <(kubectl completion bash)): for a plugin's arguments kubectl runs the
executable kubectl_complete-gobrave from PATH, which calls 'kubectl gobrave __complete'. 'make install'
installs it next to kubectl-gobrave (from hack/completion/). IDs are completed from the state
database, -n from the cluster, --context, --cluster and --user from the kubeconfig.

The scripts the sub-commands print complete a command named gobrave, for those who use an alias:
  alias gobrave='kubectl gobrave'`
	c.Example = `  kubectl gobrave completion bash > ~/.gobrave-completion.bash   # with: alias gobrave='kubectl gobrave'
  install -m 0755 hack/completion/kubectl_complete-gobrave ~/.local/bin/   # for 'kubectl gobrave <TAB>'`
	load := map[string]string{
		"bash": `To load it in the current session (needs the bash-completion package):

	alias gobrave='kubectl gobrave'
	source <(kubectl gobrave completion bash)

For every new session, add both lines to ~/.bashrc.`,
		"zsh": `To load it in the current session (needs compinit; zsh completes aliases through
kubectl's own completion unless 'setopt complete_aliases' is set):

	alias gobrave='kubectl gobrave'
	source <(kubectl gobrave completion zsh)

For every new session, add both lines to ~/.zshrc.`,
		"fish": `To load it in the current session:

	alias gobrave='kubectl gobrave'
	kubectl gobrave completion fish | source

For every new session: kubectl gobrave completion fish > ~/.config/fish/completions/gobrave.fish`,
		"powershell": `To load it in the current session:

	function gobrave { kubectl gobrave @args }
	kubectl gobrave completion powershell | Out-String | Invoke-Expression

For every new session, add the output of the second line to your PowerShell profile.`,
	}
	for _, sub := range c.Commands() {
		text, ok := load[sub.Name()]
		if !ok {
			continue
		}
		sub.Long = fmt.Sprintf("Generate the autocompletion script of kubectl gobrave for %s, for the command\ngobrave (an alias of 'kubectl gobrave'); 'kubectl gobrave <TAB>' itself is completed by kubectl\nthrough kubectl_complete-gobrave (see 'kubectl gobrave completion --help').\n\n%s", sub.Name(), text)
		sub.Example = "  kubectl gobrave completion " + sub.Name()
	}
}
