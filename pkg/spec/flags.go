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

// ParseVolume parses a --volume value SRC:DST[:ro|:rw], the absolute host
// path, the absolute container path and the mount mode (rw by default).
func ParseVolume(s string) (Volume, error) {
	bad := invalidf("--volume %q: must be SRC:DST or SRC:DST:ro, an absolute host path and an absolute container path, e.g. /srv/data:/data:ro", s)
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Volume{}, bad
	}
	v := Volume{Source: parts[0], Target: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			v.ReadOnly = true
		case "rw":
		default:
			return Volume{}, invalidf("--volume %q: unknown mode %q, use ro (read-only) or rw (the default)", s, parts[2])
		}
	}
	return v, nil
}

// ParseEnvSecret parses an --env-secret value KEY=SECRET/KEY: the variable
// KEY is read from key KEY of the Secret SECRET.
func ParseEnvSecret(s string) (EnvSecret, error) {
	name, ref, ok := strings.Cut(s, "=")
	secret, key, ok2 := strings.Cut(ref, "/")
	if !ok || !ok2 || name == "" || secret == "" || key == "" {
		return EnvSecret{}, invalidf("--env-secret %q: must be NAME=SECRET/KEY, e.g. --env-secret DB_PASSWORD=db-creds/password", s)
	}
	return EnvSecret{Name: name, Secret: secret, Key: key}, nil
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
