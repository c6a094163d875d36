package spec

import (
	"strings"
)

// ParseKeyValue parses a KEY=VALUE flag value such as --env or --label.
// The value may contain '='; the key must not be empty. flagName names the
// flag in the error, with or without its leading dashes.
func ParseKeyValue(flagName, s string) (k, v string, err error) {
	flag := "--" + strings.TrimLeft(flagName, "-")
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", invalidf("%s %q: must be KEY=VALUE with a non-empty KEY, e.g. %s FOO=bar", flag, s, flag)
	}
	return k, v, nil
}

// ParseVolume parses a --volume value SRC:DST, the absolute host path and
// the absolute container path.
func ParseVolume(s string) (Volume, error) {
	src, dst, ok := strings.Cut(s, ":")
	if !ok || src == "" || dst == "" || strings.Contains(dst, ":") {
		return Volume{}, invalidf("--volume %q: must be SRC:DST, an absolute host path and an absolute container path, e.g. /srv/data:/data", s)
	}
	return Volume{Source: src, Target: dst}, nil
}

// ParseConstraint parses a --constraint value 'KEY OP [V1,V2]', for example
// "disktype In ssd,nvme", "hostname In node-1", "gpu Exists" or "cores Gt 4".
// The values may also be written [a,b]. The operator is matched without
// regard to case and returned in its canonical spelling; the type is node.
func ParseConstraint(s string) (SchedulingConstraint, error) {
	const form = "must be 'KEY OP [V1,V2]', e.g. 'disktype In ssd,nvme', 'gpu Exists' or 'cores Gt 4'"
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return SchedulingConstraint{}, invalidf("--constraint %q: %s", s, form)
	}
	op := canonicalOperator(fields[1])
	if op == "" {
		return SchedulingConstraint{}, invalidf("--constraint %q: unknown operator %q, use one of %s", s, fields[1], strings.Join(Operators, ", "))
	}
	c := SchedulingConstraint{Type: ConstraintTypeNode, Key: fields[0], Operator: op}
	if list := strings.Join(fields[2:], ""); list != "" {
		if strings.HasPrefix(list, "[") != strings.HasSuffix(list, "]") {
			return SchedulingConstraint{}, invalidf("--constraint %q: unbalanced brackets in the values; %s", s, form)
		}
		list = strings.TrimSuffix(strings.TrimPrefix(list, "["), "]")
		if list != "" {
			for _, v := range strings.Split(list, ",") {
				if v == "" {
					return SchedulingConstraint{}, invalidf("--constraint %q: empty value in the list; %s", s, form)
				}
				c.Values = append(c.Values, v)
			}
		}
	}
	if msg := checkConstraint(c); msg != "" {
		return SchedulingConstraint{}, invalidf("--constraint %q: %s", s, msg)
	}
	return c, nil
}

func canonicalOperator(op string) string {
	for _, o := range Operators {
		if strings.EqualFold(o, op) {
			return o
		}
	}
	return ""
}
