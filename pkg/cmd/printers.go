package cmd

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// templateFormats are the -o formats that take an argument, as kubectl's.
var templateFormats = []string{
	"jsonpath=", "jsonpath-file=", "go-template=", "go-template-file=", "template=", "templatefile=",
	"custom-columns=", "custom-columns-file=",
}

// printFlags are kubectl's printer flags of ps, events and inspect.
type printFlags struct {
	Output     string
	NoHeaders  bool
	SortBy     string
	ShowLabels bool
}

// addPrintFlags binds -o and, for listings, --no-headers and --sort-by.
func (p *printFlags) addFlags(cmd *cobra.Command, formats string, list bool) {
	cmd.Flags().StringVarP(&p.Output, "output", "o", p.Output, "Output format: "+formats+
		", jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC, custom-columns-file=FILE, go-template=TEMPLATE or go-template-file=FILE (fields as in -o json)")
	if list {
		cmd.Flags().BoolVar(&p.NoHeaders, "no-headers", p.NoHeaders, "Print no header line in tables and custom columns")
		cmd.Flags().StringVar(&p.SortBy, "sort-by", p.SortBy, "Sort by a JSONPath of the -o json objects, e.g. '{.updatedAt}' or .name")
	}
}

// isTemplate reports whether output is one of the formats with an argument.
func isTemplate(output string) bool {
	for _, f := range templateFormats {
		if strings.HasPrefix(output, f) {
			return true
		}
	}
	return false
}

// validateOutputs checks -o: one of plain, or a template format (whose
// template newObjPrinter then parses).
func validateOutputs(output string, plain ...string) error {
	if isTemplate(output) {
		return nil
	}
	for _, f := range templateFormats {
		if output == strings.TrimSuffix(f, "=") {
			return usageErrorf("-o %s needs a template: -o %sTEMPLATE", output, f)
		}
	}
	if err := validateOutput(output, plain...); err != nil {
		var names []string
		for _, a := range plain {
			if a != "" {
				names = append(names, a)
			}
		}
		for _, f := range templateFormats {
			names = append(names, f+"…")
		}
		return usageErrorf("output format %q is not supported (use one of: %s)", output, strings.Join(names, ", "))
	}
	return nil
}

// column is one column of -o custom-columns.
type column struct {
	header string
	path   *jsonpath.JSONPath
}

// objPrinter prints the objects of -o json with a jsonpath, a Go template
// (cli-runtime's printers over client-go's jsonpath and text/template) or
// custom columns.
type objPrinter struct {
	format   string // "jsonpath", "go-template" or "custom-columns"
	template string // as given, for errors
	jsonpath *printers.JSONPathPrinter
	gotmpl   *printers.GoTemplatePrinter
	columns  []column
}

// newObjPrinter parses a template -o; a bad one is a usage error naming it.
func newObjPrinter(output string) (*objPrinter, error) {
	name, arg, _ := strings.Cut(output, "=")
	if strings.HasSuffix(name, "-file") || name == "templatefile" {
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, usageErrorf("-o %s: %v (give a readable file)", name, err)
		}
		arg = string(b)
		name = strings.TrimSuffix(strings.TrimSuffix(name, "-file"), "file")
	}
	p := &objPrinter{template: arg}
	switch name {
	case "jsonpath":
		p.format = "jsonpath"
		jp, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return nil, usageErrorf("jsonpath template %q: %v (see https://kubernetes.io/docs/reference/kubectl/jsonpath/)", arg, err)
		}
		jp.AllowMissingKeys(true)
		p.jsonpath = jp
	case "go-template", "template":
		p.format = "go-template"
		gt, err := printers.NewGoTemplatePrinter([]byte(arg))
		if err != nil {
			return nil, usageErrorf("go-template %q: %v", arg, err)
		}
		gt.AllowMissingKeys(true)
		p.gotmpl = gt
	case "custom-columns":
		p.format = "custom-columns"
		cols, err := parseColumns(output, arg)
		if err != nil {
			return nil, err
		}
		p.columns = cols
	default:
		return nil, usageErrorf("output format %q is not supported", output)
	}
	return p, nil
}

// parseColumns reads kubectl's custom-columns: HEADER:JSONPATH,... on the
// command line; in a file, a line of headers and a line of JSONPaths.
func parseColumns(output, spec string) ([]column, error) {
	var pairs [][2]string
	if strings.HasPrefix(output, "custom-columns-file=") {
		lines := strings.Split(strings.TrimSpace(spec), "\n")
		if len(lines) != 2 {
			return nil, usageErrorf("-o %s: want two lines, the headers and their JSONPaths, got %d", output, len(lines))
		}
		hs, ps := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(hs) != len(ps) || len(hs) == 0 {
			return nil, usageErrorf("-o %s: %d headers but %d JSONPaths", output, len(hs), len(ps))
		}
		for i := range hs {
			pairs = append(pairs, [2]string{hs[i], ps[i]})
		}
	} else {
		for part := range strings.SplitSeq(spec, ",") {
			h, path, ok := strings.Cut(part, ":")
			if !ok || h == "" || path == "" {
				return nil, usageErrorf("custom-columns %q: %q is not HEADER:JSONPATH (e.g. -o custom-columns=ID:.runtimeID,STATE:.state)", spec, part)
			}
			pairs = append(pairs, [2]string{h, path})
		}
	}
	var cols []column
	for _, pr := range pairs {
		jp, err := parsePath(pr[1])
		if err != nil {
			return nil, usageErrorf("custom-columns %q: column %s: %v", spec, pr[0], err)
		}
		cols = append(cols, column{header: pr[0], path: jp})
	}
	return cols, nil
}

// parsePath parses a relaxed JSONPath as kubectl's custom-columns and
// --sort-by take it: .a.b, a.b or {.a.b}.
func parsePath(expr string) (*jsonpath.JSONPath, error) {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "{") && strings.HasSuffix(e, "}") {
		e = e[1 : len(e)-1]
	}
	if !strings.HasPrefix(e, ".") && !strings.HasPrefix(e, "[") {
		e = "." + e
	}
	jp := jsonpath.New("column").AllowMissingKeys(true)
	if err := jp.Parse("{" + e + "}"); err != nil {
		return nil, err
	}
	return jp, nil
}

// toObject is v as -o json prints it, decoded: what the templates see.
func toObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// listObject wraps the objects as kubectl wraps a listing: a List with
// items, so that {.items[*].runtimeID} and {{range .items}} read as usual.
func listObject(items []map[string]any) map[string]any {
	its := make([]any, len(items))
	for i, it := range items {
		its[i] = it
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": its}
}

// print prints obj (one object, or a listObject for jsonpath and go-template)
// or, for custom-columns, the rows of items. The output is written only
// when the whole template ran: a template that fails prints nothing.
func (p *objPrinter) print(w io.Writer, obj map[string]any, items []map[string]any, noHeaders bool) error {
	var buf bytes.Buffer
	switch p.format {
	case "jsonpath":
		if err := p.jsonpath.Execute(&buf, obj); err != nil {
			return usageErrorf("jsonpath template %q: %v", p.template, err)
		}
	case "go-template":
		u := &unstructured.Unstructured{Object: obj}
		if err := p.gotmpl.PrintObj(u, io.Discard); err != nil {
			return usageErrorf("go-template %q: %s", p.template, unwrapTemplateErr(err, p.template))
		}
		if err := p.gotmpl.PrintObj(u, &buf); err != nil {
			return err
		}
	case "custom-columns":
		tw := printers.GetNewTabWriter(&buf)
		if !noHeaders {
			hs := make([]string, len(p.columns))
			for i, c := range p.columns {
				hs[i] = c.header
			}
			fmt.Fprintln(tw, strings.Join(hs, "\t"))
		}
		for _, it := range items {
			cells := make([]string, len(p.columns))
			for i, c := range p.columns {
				v, err := cellText(c.path, it)
				if err != nil {
					return usageErrorf("custom-columns: column %s: %v", c.header, err)
				}
				cells[i] = escapeTerminal(v)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// unwrapTemplateErr keeps the first line of cli-runtime's template error,
// without its "error executing template ...: " that names the template
// again.
func unwrapTemplateErr(err error, tmpl string) string {
	s := err.Error()
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimPrefix(s, fmt.Sprintf("error executing template %q: ", tmpl))
}

// cellText is kubectl's custom-columns cell: the values found, joined with
// commas; <none> when there is none (or it is null).
func cellText(jp *jsonpath.JSONPath, obj map[string]any) (string, error) {
	results, err := jp.FindResults(obj)
	if err != nil {
		return "", err
	}
	var vals []string
	for _, rs := range results {
		for _, r := range rs {
			if !r.IsValid() || !r.CanInterface() || r.Interface() == nil {
				continue
			}
			vals = append(vals, fmt.Sprint(r.Interface()))
		}
	}
	if len(vals) == 0 {
		return "<none>", nil
	}
	return strings.Join(vals, ","), nil
}

// sortObjects sorts items by the value at a relaxed JSONPath, as kubectl's
// --sort-by: missing values first, then numbers by value, strings and
// booleans in their order; equal values keep their order (the listing's).
func sortObjects(items []map[string]any, expr string) error {
	jp, err := parsePath(expr)
	if err != nil {
		return usageErrorf("--sort-by %q: %v (give a JSONPath such as '{.updatedAt}')", expr, err)
	}
	keys := make([]any, len(items))
	for i, it := range items {
		rs, err := jp.FindResults(it)
		if err != nil {
			return usageErrorf("--sort-by %q: %v", expr, err)
		}
		if len(rs) > 0 && len(rs[0]) > 1 {
			return usageErrorf("--sort-by %q selects %d values of one object: give a path to one field", expr, len(rs[0]))
		}
		if len(rs) > 0 && len(rs[0]) == 1 && rs[0][0].IsValid() && rs[0][0].CanInterface() {
			keys[i] = rs[0][0].Interface()
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var bad error
	slices.SortStableFunc(idx, func(a, b int) int {
		c, err := compareValues(keys[a], keys[b])
		if err != nil && bad == nil {
			bad = usageErrorf("--sort-by %q: %v", expr, err)
		}
		return c
	})
	if bad != nil {
		return bad
	}
	sorted := make([]map[string]any, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

func compareValues(a, b any) (int, error) {
	switch {
	case a == nil && b == nil:
		return 0, nil
	case a == nil:
		return -1, nil
	case b == nil:
		return 1, nil
	}
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y), nil
		}
	case string:
		if y, ok := b.(string); ok {
			return cmp.Compare(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0, nil
			case !x:
				return -1, nil
			}
			return 1, nil
		}
	default:
		return 0, fmt.Errorf("cannot sort by a %T (give a path to a string, number or boolean)", a)
	}
	return 0, fmt.Errorf("cannot compare %T with %T", a, b)
}

// jsonArrayWriter streams a JSON array exactly as json.MarshalIndent(items,
// "", "  ") prints it (printData's -o json), one element at a time.
type jsonArrayWriter struct {
	w *bufio.Writer
	n int
}

func newJSONArrayWriter(w io.Writer) *jsonArrayWriter {
	return &jsonArrayWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (j *jsonArrayWriter) add(v any) error {
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	if j.n == 0 {
		j.w.WriteString("[\n  ")
	} else {
		j.w.WriteString(",\n  ")
	}
	j.n++
	_, err = j.w.Write(b)
	return err
}

func (j *jsonArrayWriter) close() error {
	if j.n == 0 {
		j.w.WriteString("[]\n")
	} else {
		j.w.WriteString("\n]\n")
	}
	return j.w.Flush()
}
