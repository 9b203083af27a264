package idgen

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NodeFromEnv reads a node id for layout l from the environment variable
// key, as seed 002 passes process ids: either a whole node id ("37") or, for
// a layout with datacenter bits, datacenter and worker separated by a colon
// ("1:5"). Errors wrap [ErrNoNode] (unset or empty), [ErrSyntax] or
// [ErrNodeRange].
func NodeFromEnv(l Layout, key string) (int64, error) {
	v, ok := os.LookupEnv(key)
	if !ok || v == "" {
		return 0, fmt.Errorf("idgen: environment variable %s not set: %w", key, ErrNoNode)
	}
	node, err := parseNode(l, strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("idgen: node id from %s=%q: %w", key, v, err)
	}
	return node, nil
}

// NodeFromHostname takes the node id for layout l from the ordinal at the
// end of a StatefulSet pod's host name: "ingest-7" gives 7. Pass
// os.Hostname's result. Errors wrap [ErrNoNode] (no ordinal) or
// [ErrNodeRange].
func NodeFromHostname(l Layout, hostname string) (int64, error) {
	// A pod's host name is its name, "<set>-<ordinal>"; a FQDN may follow.
	name, _, _ := strings.Cut(hostname, ".")
	i := strings.LastIndexByte(name, '-')
	ordinal := name[i+1:]
	if i < 1 || ordinal == "" || strings.TrimLeft(ordinal, "0123456789") != "" {
		return 0, fmt.Errorf("idgen: host name %q does not end in -<ordinal>: %w", hostname, ErrNoNode)
	}
	n, err := strconv.ParseInt(ordinal, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("idgen: host name %q: ordinal out of range: %w", hostname, ErrNodeRange)
	}
	if err := l.checkNode(n); err != nil {
		return 0, fmt.Errorf("idgen: host name %q: %w", hostname, err)
	}
	return n, nil
}

// parseNode parses "node" or "datacenter:worker".
func parseNode(l Layout, s string) (int64, error) {
	num := func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s: %w", s, ErrNodeRange)
		}
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer: %w", s, ErrSyntax)
		}
		return n, nil
	}
	if dc, w, ok := strings.Cut(s, ":"); ok {
		if dc == "" || w == "" {
			return 0, fmt.Errorf("%q is not datacenter:worker: %w", s, ErrSyntax)
		}
		d, err := num(dc)
		if err != nil {
			return 0, err
		}
		wk, err := num(w)
		if err != nil {
			return 0, err
		}
		return l.NodeOf(d, wk)
	}
	n, err := num(s)
	if err != nil {
		return 0, err
	}
	if err := l.checkNode(n); err != nil {
		return 0, err
	}
	return n, nil
}
