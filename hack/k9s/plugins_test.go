package k9s

// Validates the repository's k9s plugin file (../../plugins.yaml) against k9s's own JSON schemas,
// read from the k9s module this folder's go.mod pins (so they cannot drift from the k9s that
// build.sh builds and test/e2e/k9s_test.go runs), and checks the shortcut layout docs/k9s.md
// promises.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

const (
	pluginsFile = "../../plugins.yaml"
	k9sModule   = "github.com/derailed/k9s"
	schemaDir   = "internal/config/json/schemas" // in the k9s module
)

// k9sDir is the k9s module's folder in the module cache, downloaded if needed.
func k9sDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", k9sModule).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go mod download -json %s: %v\n%s%s", k9sModule, err, out, stderr)
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go mod download -json %s: %v\n%s", k9sModule, err, out)
	}
	if m.Error != "" || m.Dir == "" {
		t.Fatalf("go mod download -json %s: no folder (%s)", k9sModule, m.Error)
	}
	t.Logf("schemas from %s@%s", k9sModule, m.Version)
	return m.Dir
}

// compile compiles one of k9s's schema files (plugins.json, plugin.json).
func compile(t *testing.T, dir, name string) *jsonschema.Schema {
	t.Helper()
	path := filepath.Join(dir, schemaDir, name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	url := "file://" + filepath.ToSlash(path)
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", path, err)
	}
	return s
}

// instance turns YAML into the JSON value k9s validates: k9s unmarshals the file with
// gopkg.in/yaml.v3 into an `any` and hands that to its validator.
func instance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("not representable as JSON: %v", err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readPlugins(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(pluginsFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// plugin is one entry as k9s v0.50.16 reads it (internal/config/plugin.go).
type plugin struct {
	ShortCut        string   `yaml:"shortCut"`
	Override        bool     `yaml:"override"`
	Description     string   `yaml:"description"`
	Scopes          []string `yaml:"scopes"`
	Command         string   `yaml:"command"`
	Args            []string `yaml:"args"`
	Background      bool     `yaml:"background"`
	OverwriteOutput bool     `yaml:"overwriteOutput"`
	Confirm         bool     `yaml:"confirm"`
	Dangerous       bool     `yaml:"dangerous"`
}

func TestPluginsSchema(t *testing.T) {
	dir := k9sDir(t)
	data := readPlugins(t)

	// The whole file against the schema of a complete plugins file. k9s tries plugins.json first
	// (then plugin.json, plugin-multi.json); a file that fails all three is not loaded at all.
	full := compile(t, dir, "plugins.json")
	if err := full.Validate(instance(t, data)); err != nil {
		t.Fatalf("%s is not a valid k9s plugins file:\n%v", pluginsFile, err)
	}

	// plugins.json does not forbid unknown keys inside an entry (k9s would ignore a misspelt
	// "shortcut" without a word); plugin.json, the schema of a single entry, does.
	one := compile(t, dir, "plugin.json")
	var doc struct {
		Plugins map[string]yaml.Node `yaml:"plugins"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Plugins) == 0 {
		t.Fatalf("%s defines no plugins", pluginsFile)
	}
	for name, node := range doc.Plugins {
		b, err := yaml.Marshal(&node)
		if err != nil {
			t.Fatal(err)
		}
		if err := one.Validate(instance(t, b)); err != nil {
			t.Errorf("plugin %s: %v", name, err)
		}
	}

	// The schema really is enforced: broken copies of the file must fail.
	for what, broken := range map[string]string{
		"a key beside plugins": "extra: 1\n" + string(data),
		"no command":           strings.Replace(string(data), "    command: bash\n", "", 1),
		"scopes not a list":    strings.Replace(string(data), "    scopes: [deployments]\n", "    scopes: deployments\n", 1),
	} {
		if broken == string(data) {
			t.Fatalf("%s: the edit did not apply", what)
		}
		if err := full.Validate(instance(t, []byte(broken))); err == nil {
			t.Errorf("plugins.json accepted a file with %s", what)
		}
	}
}

var shortCutRX = regexp.MustCompile(`^(Shift-[A-Z]|Ctrl-[A-Z]|[a-z])$`)

// TestPluginsLayout checks what docs/k9s.md promises: one shortcut per verb in every scope, no
// clash with k9s's own keys in those views, confirmation before stop and delete.
func TestPluginsLayout(t *testing.T) {
	var doc struct {
		Plugins map[string]plugin `yaml:"plugins"`
	}
	if err := yaml.Unmarshal(readPlugins(t), &doc); err != nil {
		t.Fatal(err)
	}

	// Keys k9s v0.50.16 binds itself in each view (internal/view: table.go, browser.go, dp.go,
	// job.go, pod.go and the extenders those views wrap themselves in). A plugin on one of them
	// is dropped with "duplicate plugin key" unless it sets override, which would hide k9s's action.
	shared := []string{"Shift-A", "Shift-N", "Shift-F", "Shift-J", "Shift-V"}
	reserved := map[string][]string{
		"deployments": append([]string{"Shift-L", "Shift-R", "Shift-U"}, shared...),
		"jobs":        shared,
		"pods": append([]string{"Shift-C", "Shift-I", "Shift-M", "Shift-O", "Shift-R", "Shift-S",
			"Shift-T", "Shift-X", "Shift-Z"}, shared...),
	}
	want := map[string]map[string]string{ // scope -> shortcut -> gobrave verb
		"deployments": {"Shift-D": "inspect", "Shift-E": "events", "Shift-G": "logs", "Shift-S": "stop", "Shift-T": "start", "Shift-X": "delete"},
		"jobs":        {"Shift-D": "inspect", "Shift-E": "events", "Shift-G": "logs", "Shift-S": "stop", "Shift-T": "start", "Shift-X": "delete"},
		"pods":        {"Shift-D": "inspect", "Shift-E": "events", "Shift-G": "logs"},
	}
	idPrefix := map[string]string{"deployments": "deployment/$NAME", "jobs": "job/$NAME", "pods": "$COL-LABELS"}

	got := map[string]map[string]string{}
	names := make([]string, 0, len(doc.Plugins))
	for name := range doc.Plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := doc.Plugins[name]
		if !shortCutRX.MatchString(p.ShortCut) {
			t.Errorf("%s: shortCut %q is not one k9s accepts", name, p.ShortCut)
		}
		if p.Override {
			t.Errorf("%s: override hides a k9s action", name)
		}
		if len(p.Scopes) != 1 {
			t.Errorf("%s: scopes %v: want one scope per entry (the ID differs per kind)", name, p.Scopes)
			continue
		}
		scope := p.Scopes[0]
		verb := gobraveVerb(p)
		if got[scope] == nil {
			got[scope] = map[string]string{}
		}
		if other, dup := got[scope][p.ShortCut]; dup {
			t.Errorf("%s: %s is already %s in %s", name, p.ShortCut, other, scope)
		}
		got[scope][p.ShortCut] = verb
		if slices.Contains(reserved[scope], p.ShortCut) {
			t.Errorf("%s: %s is a k9s key in the %s view", name, p.ShortCut, scope)
		}
		if !slices.Contains(p.Args, idPrefix[scope]) || !slices.Contains(p.Args, "$NAMESPACE") || !slices.Contains(p.Args, "$CONTEXT") {
			t.Errorf("%s: args %q: want %s, $NAMESPACE and $CONTEXT", name, p.Args, idPrefix[scope])
		}
		mutates := verb == "stop" || verb == "start" || verb == "delete"
		if p.Dangerous != mutates {
			t.Errorf("%s: dangerous=%v, want %v (off in read-only k9s exactly when it changes the cluster)", name, p.Dangerous, mutates)
		}
		// Reading verbs keep their output on the screen (foreground); changing verbs report
		// gobrave's one-line result in k9s's status line (background with overwriteOutput: a
		// foreground command's report is wiped when k9s resumes).
		if p.Background != mutates || p.OverwriteOutput != mutates {
			t.Errorf("%s: background=%v overwriteOutput=%v, want both %v", name, p.Background, p.OverwriteOutput, mutates)
		}
		if wantConfirm := verb == "stop" || verb == "delete"; p.Confirm != wantConfirm {
			t.Errorf("%s: confirm=%v, want %v", name, p.Confirm, wantConfirm)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("shortcuts:\n got  %v\n want %v", got, want)
	}
}

var verbRX = regexp.MustCompile(`kubectl gobrave (\w+) `)

// gobraveVerb is the gobrave verb the entry's script runs (the same in every branch).
func gobraveVerb(p plugin) string {
	verbs := map[string]bool{}
	for _, a := range p.Args {
		for _, m := range verbRX.FindAllStringSubmatch(a, -1) {
			verbs[m[1]] = true
		}
	}
	if len(verbs) != 1 {
		return fmt.Sprintf("%v", verbs)
	}
	for v := range verbs {
		return v
	}
	return ""
}
