package cmd_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// commands returns every command of the tree but cobra's own.
func commands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Name() == "__complete" {
			return
		}
		out = append(out, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

func newRoot() *cobra.Command {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	return cmd.NewCmdRoot(cmd.NewFactory(), streams)
}

func TestHelpReadsKubectlGobrave(t *testing.T) {
	h := newHarness(t)
	r := h.run("--help")
	checkExit(t, r, 0, "")
	for _, want := range []string{"Usage:\n", "\n  kubectl gobrave [command]\n", `Use "kubectl gobrave [command] --help"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("root help does not contain %q:\n%s", want, r.stdout)
		}
	}
	for _, c := range commands(newRoot())[1:] {
		t.Run(c.Name(), func(t *testing.T) {
			r := h.run(c.Name(), "--help")
			checkExit(t, r, 0, "")
			want := "Usage:\n  kubectl gobrave " + c.Name()
			if !strings.Contains(r.stdout, want) {
				t.Errorf("help does not contain %q:\n%s", want, r.stdout)
			}
			if regexp.MustCompile(`(?m)^  gobrave `).MatchString(r.stdout) {
				t.Errorf("help names the command without kubectl:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, "Examples:\n") {
				t.Errorf("help has no Examples section:\n%s", r.stdout)
			}
		})
	}
	if n := h.actions(); n != 0 {
		t.Errorf("help made %d API requests", n)
	}
	if _, exists := h.snapshot(); exists {
		t.Error("help created the state database")
	}
}

func TestEveryCommandHasAnExample(t *testing.T) {
	for _, c := range commands(newRoot()) {
		t.Run(c.CommandPath(), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Fatalf("%s has no Example", c.CommandPath())
			}
			if c.Short == "" {
				t.Errorf("%s has no Short", c.CommandPath())
			}
			// Each example line that runs the plugin runs it as kubectl gobrave <this command>.
			prefix := strings.TrimPrefix(c.CommandPath(), "kubectl ")
			for _, line := range strings.Split(c.Example, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				ok := strings.Contains(line, "kubectl "+prefix)
				for _, a := range c.Aliases {
					ok = ok || strings.Contains(line, "kubectl "+strings.TrimSuffix(prefix, c.Name())+a)
				}
				if !ok {
					t.Errorf("example %q does not run 'kubectl %s'", line, prefix)
				}
			}
		})
	}
}

// TestSuggestedCommandsExist: every 'kubectl gobrave VERB' that a help text
// or an error message tells the user to run is a command.
func TestSuggestedCommandsExist(t *testing.T) {
	root := newRoot()
	verbs := map[string]bool{}
	for _, c := range root.Commands() {
		verbs[c.Name()] = true
		for _, a := range c.Aliases {
			verbs[a] = true
		}
	}
	// In prose a command is quoted: 'kubectl gobrave ps -a'; in examples
	// it starts a line or a $(...).
	quoted := regexp.MustCompile(`'kubectl gobrave ([a-z][a-z-]*)`)
	example := regexp.MustCompile(`(?m)(?:^\s*|\$\()kubectl gobrave ([a-z][a-z-]*)`)
	check := func(where, text string, re *regexp.Regexp) {
		t.Helper()
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if !verbs[m[1]] {
				t.Errorf("%s suggests 'kubectl gobrave %s', which is not a command", where, m[1])
			}
		}
	}
	for _, c := range commands(root) {
		check(c.CommandPath()+" help", c.Long, quoted)
		check(c.CommandPath()+" examples", c.Example, example)
	}
	h := newHarness(t)
	h.ok("create", "web", "--image", "nginx:1.27")
	for _, args := range [][]string{{"stop", "nosuch"}, {"stop", "job/web"}, {"logs", "web"}} {
		r := h.run(args...)
		checkExit(t, r, 1, "")
		check(strings.Join(args, " ")+" error", r.msg, quoted)
	}
}
