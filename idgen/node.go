package idgen

import (
	"fmt"
	"strconv"
	"strings"
)

// NodeFromHostname takes the node id for layout l from the ordinal at the
// end of a StatefulSet pod's host name, "<set>-<ordinal>": "ingest-7" gives
// 7. Pass os.Hostname's result; a domain after the first dot is ignored.
//
// It is safe only for the pods of one StatefulSet whose ordinals stay below
// the layout's node count (l.MaxNode()+1), each pod running one generator:
// a StatefulSet never runs two pods with the same ordinal. Two StatefulSets,
// or one in two namespaces or clusters, issuing IDs to the same consumers
// repeat each other's node ids. Anywhere else take a leased node id
// ([NewLeased] with a redisidgen or sqlidgen Leaser), or assign node ids
// yourself (see [New]).
//
// It refuses names that only look like a StatefulSet pod's, with an error
// wrapping [ErrInvalidConfig] that says why:
//   - a name other than "<set>-<ordinal>", the set name made of lowercase
//     letters, digits and dashes, neither starting nor ending with a dash,
//     as Kubernetes requires;
//   - an ordinal with a leading zero, which a StatefulSet never gives;
//   - a set name that itself ends in -<digits>, as host names made from an
//     address do: ip-10-0-0-1 and ip-10-0-7-1 would share node 1;
//   - a Deployment's (ReplicaSet's) pod, "<name>-<hash>-<suffix>" such as
//     web-5d8f7c9b4-24567: a pod-template hash of 8 to 10 characters and a
//     random suffix of 5 from the alphabet of Kubernetes' generated names,
//     which pods of two ReplicaSets can share.
//
// An ordinal the layout cannot hold wraps [ErrInvalidConfig].
func NodeFromHostname(l Layout, hostname string) (int64, error) {
	name, _, _ := strings.Cut(hostname, ".")
	ordinal, why := podOrdinal(name)
	if why != "" {
		return 0, fmt.Errorf("%w: host name %q is not a StatefulSet pod's name: %s; take a leased node id (idgen.NewLeased with redisidgen or sqlidgen) or assign one yourself", ErrInvalidConfig, hostname, why)
	}
	n, err := strconv.ParseInt(ordinal, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: host name %q: ordinal out of range", ErrInvalidConfig, hostname)
	}
	if err := l.checkNode(n); err != nil {
		// err names the package already.
		return 0, fmt.Errorf("%w (host name %q)", err, hostname)
	}
	return n, nil
}

// generatedAlphabet holds the characters of the random parts of the names
// Kubernetes generates (k8s.io/apimachinery/pkg/util/rand): pod-template
// hashes and pod name suffixes.
const generatedAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// podOrdinal returns the ordinal of a StatefulSet pod's name, or why name is
// not one.
func podOrdinal(name string) (ordinal, why string) {
	i := strings.LastIndexByte(name, '-')
	set, ordinal := name[:max(i, 0)], name[i+1:]
	if i < 1 || set[0] == '-' || set[len(set)-1] == '-' || !allIn(set, "abcdefghijklmnopqrstuvwxyz0123456789-") ||
		ordinal == "" || !allIn(ordinal, "0123456789") {
		return "", "it is not <set>-<ordinal>, a set name of lowercase letters, digits and inner dashes"
	}
	if len(ordinal) > 1 && ordinal[0] == '0' {
		return "", fmt.Sprintf("ordinal %q has a leading zero, which a StatefulSet never gives", ordinal)
	}
	j := strings.LastIndexByte(set, '-')
	last := set[j+1:]
	if j >= 0 && allIn(last, "0123456789") {
		return "", fmt.Sprintf("the set name %q ends in -<digits> as names made from an address do (ip-10-0-7-1), and names that differ only before the ordinal would share node %s", set, ordinal)
	}
	if j > 0 && len(last) >= 8 && len(last) <= 10 && allIn(last, generatedAlphabet) && len(ordinal) == 5 && allIn(ordinal, generatedAlphabet) {
		return "", fmt.Sprintf("it looks like a Deployment's pod (ReplicaSet hash %q, random suffix %q), and pods of two ReplicaSets can share the suffix", last, ordinal)
	}
	return ordinal, ""
}

// allIn reports whether every byte of s is in chars.
func allIn(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(chars, s[i]) < 0 {
			return false
		}
	}
	return true
}
