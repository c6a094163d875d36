// Package config loads gobrave's runtime profiles and resolves the paths of
// its config file and state database.
//
// The config file maps each runtime name to a kubeconfig context and a
// namespace, and names the default runtime:
//
//	defaultRuntime: k8s
//	runtimes:
//	  k8s: {context: "", namespace: default}   # empty context = kubeconfig's current context
//	  k3s: {context: k3s-default, namespace: ai}
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// ErrInvalid is wrapped by every error about the content of a config file
// or a runtime name.
var ErrInvalid = errors.New("invalid config")

// Environment variables read by the path resolvers.
const (
	EnvConfig        = "GOBRAVE_CONFIG"
	EnvHome          = "GOBRAVE_HOME"
	EnvXDGConfigHome = "XDG_CONFIG_HOME"
	EnvXDGDataHome   = "XDG_DATA_HOME"
)

// Config is the content of the config file.
type Config struct {
	// DefaultRuntime is used when --runtime is not given; empty means k8s.
	DefaultRuntime string `json:"defaultRuntime,omitempty" yaml:"defaultRuntime,omitempty"`
	// Runtimes maps a runtime name (k8s or k3s) to its profile.
	Runtimes map[string]Profile `json:"runtimes,omitempty" yaml:"runtimes,omitempty"`
}

// Profile says where a runtime's workloads live.
type Profile struct {
	// Context is a kubeconfig context; empty means the current context.
	Context string `json:"context,omitempty" yaml:"context,omitempty"`
	// Namespace is used when the spec sets no runtimeNamespace; empty means
	// the context's namespace, else default.
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
}

// Default is the config used when no file exists: runtime k8s on the
// kubeconfig's current context, namespace unset.
func Default() Config {
	return Config{DefaultRuntime: runtimeid.RuntimeK8s, Runtimes: map[string]Profile{runtimeid.RuntimeK8s: {}}}
}

// Runtime returns the runtime to use: flag when set, else DefaultRuntime,
// else k8s. An unknown name is an error wrapping ErrInvalid.
func (c Config) Runtime(flag string) (string, error) {
	switch {
	case flag != "":
		if !runtimeid.IsRuntime(flag) {
			return "", invalidf("--runtime %q: unknown runtime (use %s)", flag, runtimeList())
		}
		return flag, nil
	case c.DefaultRuntime != "":
		if !runtimeid.IsRuntime(c.DefaultRuntime) {
			return "", invalidf("defaultRuntime %q: unknown runtime (use %s)", c.DefaultRuntime, runtimeList())
		}
		return c.DefaultRuntime, nil
	}
	return runtimeid.RuntimeK8s, nil
}

// Profile returns the profile of runtime, the zero Profile (current
// context, namespace unset) when the file has none.
func (c Config) Profile(runtime string) Profile {
	return c.Runtimes[runtime]
}

// KnownRuntimes returns the runtime names --runtime accepts, sorted.
func KnownRuntimes() []string {
	names := append([]string(nil), runtimeid.Runtimes...)
	sort.Strings(names)
	return names
}

// ConfiguredRuntimes returns the runtime names that have a profile in c, sorted.
func (c Config) ConfiguredRuntimes() []string {
	names := make([]string, 0, len(c.Runtimes))
	for name := range c.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ConfigPath resolves the config file: the --config flag, then
// $GOBRAVE_CONFIG, then $XDG_CONFIG_HOME/gobrave/config.yaml, then
// home/.config/gobrave/config.yaml. explicit is true for the flag and the
// environment variable, whose file must exist. path is "" when nothing is
// set and home is unknown.
func ConfigPath(flag string, getenv func(string) string, home string) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	if p := getenv(EnvConfig); p != "" {
		return p, true
	}
	if xdg := getenv(EnvXDGConfigHome); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "gobrave", "config.yaml"), false
	}
	if home == "" {
		return "", false
	}
	return filepath.Join(home, ".config", "gobrave", "config.yaml"), false
}

// ErrNoHome is returned when the state database would have to be found under
// the home folder and the home folder is unknown or not an absolute path: a
// path relative to wherever the command runs would silently split the
// records (or pick up a file planted there).
var ErrNoHome = errors.New("no home folder for the state database")

// StatePath resolves the state database: the --state-db flag, then
// $GOBRAVE_HOME/state.db, then $XDG_DATA_HOME/gobrave/state.db, then
// home/.local/share/gobrave/state.db. It returns an error wrapping ErrNoHome
// when it comes to home and home is empty or relative.
func StatePath(flag string, getenv func(string) string, home string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if h := getenv(EnvHome); h != "" {
		return filepath.Join(h, "state.db"), nil
	}
	if xdg := getenv(EnvXDGDataHome); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "gobrave", "state.db"), nil
	}
	if !filepath.IsAbs(home) {
		return "", fmt.Errorf("%w: $HOME is %q, not an absolute path (set HOME or GOBRAVE_HOME, or pass --state-db)", ErrNoHome, home)
	}
	return filepath.Join(home, ".local", "share", "gobrave", "state.db"), nil
}

// LoadOrDefault loads path; when the file does not exist it returns
// Default, unless explicit (the path came from --config or
// $GOBRAVE_CONFIG), when the missing file is an error.
func LoadOrDefault(path string, explicit bool) (Config, error) {
	if path == "" && !explicit {
		return Default(), nil
	}
	c, err := Load(path)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if !explicit {
			return Default(), nil
		}
		return Config{}, fmt.Errorf("%w; create it (see docs/config.example.yaml) or point --config or $%s at an existing file", err, EnvConfig)
	}
	return c, err
}

// Load strictly reads the config file at path. An empty file is an empty
// config. An unknown key or runtime, an invalid defaultRuntime or namespace,
// or a value of the wrong type is an error wrapping ErrInvalid that names
// the file, the line and the field; every such problem is reported.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return parse(path, data)
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalidf(format string, a ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, a...)}
}

func runtimeList() string {
	return strings.Join(runtimeid.Runtimes, " or ")
}

const dns1123LabelHint = "must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)"

// decoder collects every problem of one file.
type decoder struct {
	path string
	errs []error
}

func (d *decoder) fail(n *yaml.Node, format string, a ...any) {
	d.errs = append(d.errs, invalidf("%s: line %d: %s", d.path, n.Line, fmt.Sprintf(format, a...)))
}

func parse(path string, data []byte) (Config, error) {
	d := &decoder{path: path}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, nil
		}
		return Config{}, invalidf("%s: %s", path, syntaxMessage(err))
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return Config{}, invalidf("%s: line %d: found a second YAML document; keep one config per file", path, max(next.Line, 1))
	case !errors.Is(err, io.EOF):
		return Config{}, invalidf("%s: %s", path, syntaxMessage(err))
	}
	if len(doc.Content) == 0 {
		return Config{}, nil
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return Config{}, nil
	}
	var c Config
	d.mapping(root, "", func(key, val *yaml.Node, field string) {
		switch key.Value {
		case "defaultRuntime":
			s, ok := d.str(val, field)
			if !ok || s == "" {
				return
			}
			if !runtimeid.IsRuntime(s) {
				d.fail(val, "defaultRuntime %q: unknown runtime (use %s)", s, runtimeList())
				return
			}
			c.DefaultRuntime = s
		case "runtimes":
			c.Runtimes = d.runtimes(val)
		default:
			d.fail(key, "unknown field %q (use defaultRuntime or runtimes)", field)
		}
	})
	if len(d.errs) > 0 {
		return Config{}, errors.Join(d.errs...)
	}
	return c, nil
}

func (d *decoder) runtimes(n *yaml.Node) map[string]Profile {
	out := map[string]Profile{}
	d.mapping(n, "runtimes", func(key, val *yaml.Node, field string) {
		if !runtimeid.IsRuntime(key.Value) {
			d.fail(key, "%s: unknown runtime %q (use %s)", field, key.Value, runtimeList())
			return
		}
		var p Profile
		d.mapping(val, field, func(k, v *yaml.Node, f string) {
			switch k.Value {
			case "context":
				p.Context, _ = d.str(v, f)
			case "namespace":
				ns, _ := d.str(v, f)
				if ns != "" && len(validation.IsDNS1123Label(ns)) > 0 {
					d.fail(v, "%s %q: %s", f, ns, dns1123LabelHint)
					return
				}
				p.Namespace = ns
			default:
				d.fail(k, "unknown field %q (use context or namespace)", f)
			}
		})
		out[key.Value] = p
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// mapping calls fn for each key of n, a mapping (null is an empty one),
// with the dotted field path of the value. Duplicate keys are errors.
func (d *decoder) mapping(n *yaml.Node, field string, fn func(key, val *yaml.Node, field string)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		name := field
		if name == "" {
			name = "config"
		}
		d.fail(n, "%s: want a mapping, got %s", name, describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := resolve(n.Content[i]), n.Content[i+1]
		f := key.Value
		if field != "" {
			f = field + "." + key.Value
		}
		if key.Kind != yaml.ScalarNode {
			d.fail(key, "%s: keys must be names, got %s", orConfig(field), describe(key))
			continue
		}
		if line, dup := seen[key.Value]; dup {
			d.fail(key, "%s: duplicate key, already set at line %d", f, line)
			continue
		}
		seen[key.Value] = key.Line
		fn(key, val, f)
	}
}

// str reads a string scalar; null is "". Other types are errors: quote
// the value to make it a string.
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	n = resolve(n)
	switch {
	case isNull(n):
		return "", true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		return n.Value, true
	case n.Kind == yaml.ScalarNode:
		d.fail(n, "%s: want a string, got %s (quote it if you mean text)", field, describe(n))
	default:
		d.fail(n, "%s: want a string, got %s", field, describe(n))
	}
	return "", false
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func orConfig(field string) string {
	if field == "" {
		return "config"
	}
	return field
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return strconv.Quote(n.Value)
}

func syntaxMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		msg = "bad YAML: " + msg
	}
	return msg
}
