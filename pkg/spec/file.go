package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ErrInvalid is wrapped by every parse and validation error of a spec, so
// the CLI can map it to its usage exit code with errors.Is.
var ErrInvalid = errors.New("invalid spec")

// invalidError is one problem with a spec. Its text is the message alone;
// it unwraps to ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalidf(format string, a ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, a...)}
}

// LoadFile reads and strictly parses the spec file at path. Every error
// names the file; parse errors wrap ErrInvalid. The spec is not validated:
// call Validate after merging command-line flags.
func LoadFile(path string) (ContainerSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ContainerSpec{}, fmt.Errorf("read spec file: %w", err)
	}
	return parse(path, data)
}

// Parse strictly parses a spec in YAML or JSON form (one document, a
// mapping of lowerCamelCase fields). An unknown field, a value of the wrong
// type, an empty input or several documents are errors wrapping ErrInvalid
// that name the line. The spec is not validated.
func Parse(data []byte) (ContainerSpec, error) {
	return parse("", data)
}

func parse(source string, data []byte) (ContainerSpec, error) {
	where := func(msg string) error {
		if source != "" {
			msg = source + ": " + msg
		}
		return &invalidError{msg: msg}
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return ContainerSpec{}, where("spec is empty; write at least name and image, e.g. \"name: web\" and \"image: nginx:1.27\"")
		}
		return ContainerSpec{}, where(yamlSyntaxMessage(err))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return ContainerSpec{}, where("spec is empty; write at least name and image, e.g. \"name: web\" and \"image: nginx:1.27\"")
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return ContainerSpec{}, where("spec is empty; write at least name and image, e.g. \"name: web\" and \"image: nginx:1.27\"")
	}
	if root.Kind != yaml.MappingNode {
		return ContainerSpec{}, where(fmt.Sprintf("line %d: the spec must be a mapping of fields such as \"name: web\", not %s", root.Line, describeNode(root)))
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return ContainerSpec{}, where(fmt.Sprintf("line %d: found a second YAML document; put one spec per file", max(next.Line, 1)))
	case !errors.Is(err, io.EOF):
		return ContainerSpec{}, where(yamlSyntaxMessage(err))
	}

	var fs fileSpec
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&fs); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return ContainerSpec{}, where(yamlSyntaxMessage(err))
		}
		idx := indexNodes(root)
		errs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			errs = append(errs, where(idx.rewrite(e)))
		}
		return ContainerSpec{}, errors.Join(errs...)
	}
	s := fs.spec()
	if field, why := badText(reflect.ValueOf(s), ""); field != "" {
		return ContainerSpec{}, where(fmt.Sprintf("%s: %s", field, why))
	}
	return s, nil
}

// fileSpec mirrors ContainerSpec with yaml tags equal to its json names, so
// that yaml.v3 can decode strictly (KnownFields) and report line numbers.
// TestFileSpecMirrorsContainerSpec keeps the two in step.
type fileSpec struct {
	Name                  string            `yaml:"name"`
	Image                 string            `yaml:"image"`
	WorkloadKind          string            `yaml:"workloadKind"`
	RuntimeNamespace      string            `yaml:"runtimeNamespace"`
	Entrypoint            []string          `yaml:"entrypoint"`
	Command               []string          `yaml:"command"`
	WorkDir               string            `yaml:"workDir"`
	Env                   map[string]string `yaml:"env"`
	EnvSecrets            []fileEnvSecret   `yaml:"envSecrets"`
	EnvFromSecrets        []string          `yaml:"envFromSecrets"`
	CPU                   fileCPU           `yaml:"cpu"`
	Memory                Quantity          `yaml:"memory"`
	Volumes               []fileVolume      `yaml:"volumes"`
	AllowUnsafeHostPath   bool              `yaml:"allowUnsafeHostPath"`
	SecurityProfile       string            `yaml:"securityProfile"`
	User                  string            `yaml:"user"`
	ExposedPort           int32             `yaml:"exposedPort"`
	ExposeService         bool              `yaml:"exposeService"`
	Labels                map[string]string `yaml:"labels"`
	PullPolicy            string            `yaml:"pullPolicy"`
	SchedulingConstraints []fileConstraint  `yaml:"schedulingConstraints"`
	ProgressDeadline      string            `yaml:"progressDeadline"`
}

type fileVolume struct {
	Source   string `yaml:"source"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"readOnly"`
}

type fileEnvSecret struct {
	Name   string `yaml:"name"`
	Secret string `yaml:"secret"`
	Key    string `yaml:"key"`
}

type fileConstraint struct {
	Type     string   `yaml:"type"`
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values"`
}

// fileCPU refuses .nan and .inf, which have no JSON form.
type fileCPU float64

func (c *fileCPU) UnmarshalYAML(n *yaml.Node) error {
	var f float64
	if err := n.Decode(&f); err != nil {
		return err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a finite number of cores such as 0.5, got %s", n.Line, n.Value)}}
	}
	*c = fileCPU(f)
	return nil
}

func (fs fileSpec) spec() ContainerSpec {
	s := ContainerSpec{
		Name:                fs.Name,
		Image:               fs.Image,
		WorkloadKind:        fs.WorkloadKind,
		RuntimeNamespace:    fs.RuntimeNamespace,
		Entrypoint:          nilIfEmpty(fs.Entrypoint),
		Command:             nilIfEmpty(fs.Command),
		WorkDir:             fs.WorkDir,
		Env:                 fs.Env,
		EnvFromSecrets:      nilIfEmpty(fs.EnvFromSecrets),
		AllowUnsafeHostPath: fs.AllowUnsafeHostPath,
		SecurityProfile:     fs.SecurityProfile,
		CPU:                 float64(fs.CPU),
		Memory:              fs.Memory,
		User:                fs.User,
		ExposedPort:         fs.ExposedPort,
		ExposeService:       fs.ExposeService,
		Labels:              fs.Labels,
		PullPolicy:          fs.PullPolicy,
		ProgressDeadline:    fs.ProgressDeadline,
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	for _, v := range fs.Volumes {
		s.Volumes = append(s.Volumes, Volume(v))
	}
	for _, e := range fs.EnvSecrets {
		s.EnvSecrets = append(s.EnvSecrets, EnvSecret(e))
	}
	for _, c := range fs.SchedulingConstraints {
		s.SchedulingConstraints = append(s.SchedulingConstraints, SchedulingConstraint{
			Type: c.Type, Key: c.Key, Operator: c.Operator, Values: nilIfEmpty(c.Values),
		})
	}
	return s
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// UnmarshalYAML accepts a number of bytes (268435456) or a quantity string
// (256Mi). The text is kept as written; Validate checks it.
func (q *Quantity) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			*q = ""
			return nil
		case "!!str", "!!int", "!!float":
			*q = Quantity(n.Value)
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want bytes or a quantity such as 256Mi, got %s", n.Line, describeNode(n))}}
}

// UnmarshalJSON accepts a JSON number of bytes or a quantity string.
func (q *Quantity) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "null":
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*q = Quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("%w: memory: want bytes or a quantity such as \"256Mi\", got %s", ErrInvalid, data)
	}
	*q = Quantity(n.String())
	return nil
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return strconv.Quote(n.Value)
}

// yamlSyntaxMessage turns "yaml: line 3: did not find expected key" into
// "line 3: did not find expected key".
func yamlSyntaxMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		msg = "bad YAML: " + msg
	}
	return msg
}

// nodeIndex finds the field path of a node by line, to name the field in
// yaml.v3's type errors.
type nodeIndex []indexedNode

type indexedNode struct {
	path string
	key  string // the mapping key, when the node is a mapping value
	node *yaml.Node
	line int // of the key for mapping values, else of the node
}

func indexNodes(root *yaml.Node) nodeIndex {
	var idx nodeIndex
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				idx = append(idx, indexedNode{path: p, key: k.Value, node: k, line: k.Line})
				idx = append(idx, indexedNode{path: p, node: v, line: v.Line})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx = append(idx, indexedNode{path: p, node: c, line: c.Line})
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return idx
}

var (
	reLine       = regexp.MustCompile(`^line (\d+): (.*)$`)
	reUnknown    = regexp.MustCompile(`^field (.*) not found in type \S+$`)
	reCannot     = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
	goTypeToWant = map[string]string{
		"string": "a string", "int32": "a whole number", "float64": "a number", "bool": "true or false",
		"[]string": "a list of strings", "map[string]string": "a mapping of strings",
		"[]spec.fileVolume":    "a list of {source, target, readOnly}",
		"[]spec.fileEnvSecret": "a list of {name, secret, key}", "spec.fileEnvSecret": "a mapping {name, secret, key}", "[]spec.fileConstraint": "a list of {type, key, operator, values}",
		"spec.fileVolume": "a mapping {source, target, readOnly}", "spec.fileConstraint": "a mapping {type, key, operator, values}",
	}
	yamlKinds = map[string]string{"seq": "a list", "map": "a mapping", "str": "a string", "int": "a number",
		"float": "a number", "bool": "a boolean", "null": "null", "binary": "binary data", "timestamp": "a timestamp"}
)

// rewrite turns one yaml.v3 type error line into a message naming the field.
func (idx nodeIndex) rewrite(msg string) string {
	m := reLine.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	if u := reUnknown.FindStringSubmatch(rest); u != nil {
		path := u[1]
		for _, e := range idx {
			if e.line == line && e.key == u[1] {
				path = e.path
				break
			}
		}
		return fmt.Sprintf("line %d: unknown field %q", line, path)
	}
	var value string
	if c := reCannot.FindStringSubmatch(rest); c != nil {
		value = strings.TrimSuffix(c[2], "...")
		got := yamlKinds[c[1]]
		if got == "" {
			got = "!!" + c[1]
		}
		if c[2] != "" {
			got += " " + strconv.Quote(c[2])
		}
		want := goTypeToWant[c[3]]
		if want == "" {
			want = c[3]
		}
		rest = fmt.Sprintf("want %s, got %s", want, got)
	}
	for _, e := range idx {
		if e.line == line && e.key == "" && strings.HasPrefix(e.node.Value, value) {
			return fmt.Sprintf("line %d: %s: %s", line, e.path, rest)
		}
	}
	return msg
}

// badText returns the path of the first string in v that cannot be written
// back to YAML unchanged, and why: text that is not UTF-8 (possible through
// !!binary), control characters other than tab and line breaks, or a map
// key "<<" (which YAML reads as a merge key). It returns "" when all is well.
func badText(v reflect.Value, path string) (field, why string) {
	switch v.Kind() {
	case reflect.String:
		if why := textProblem(v.String()); why != "" {
			return path, why
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			p := name
			if path != "" {
				p = path + "." + name
			}
			if f, why := badText(v.Field(i), p); f != "" {
				return f, why
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if f, why := badText(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f, why
			}
		}
	case reflect.Map:
		for _, k := range sortedKeys(v.Interface().(map[string]string)) {
			if k == "<<" {
				return path, `key "<<" is a YAML merge key, not a name`
			}
			if why := textProblem(k); why != "" {
				return fmt.Sprintf("%s key %q", path, k), why
			}
			if why := textProblem(v.MapIndex(reflect.ValueOf(k)).String()); why != "" {
				return fmt.Sprintf("%s %q", path, k), why
			}
		}
	}
	return "", ""
}

func textProblem(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8 text"
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return fmt.Sprintf("control character %U is not allowed; remove it", r)
		}
	}
	return ""
}
