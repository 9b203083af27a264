package idgen_test

import (
	"errors"
	"testing"

	"github.com/idemq/idemq/idgen"
)

func TestNodeFromEnv(t *testing.T) {
	const key = "IDGEN_TEST_NODE"
	tests := []struct {
		name   string
		layout idgen.Layout
		value  *string
		want   int64
		err    error
	}{
		{"unset", idgen.Twitter, nil, 0, idgen.ErrNoNode},
		{"empty", idgen.Twitter, ptr(""), 0, idgen.ErrNoNode},
		{"node", idgen.Twitter, ptr("37"), 37, nil},
		{"spaces", idgen.Twitter, ptr(" 37\n"), 37, nil},
		{"datacenter:worker", idgen.Twitter, ptr("1:5"), 37, nil},
		{"seed 002 machine:process", idgen.RollbackBits, ptr("7:31"), 255, nil},
		{"max", idgen.Twitter, ptr("1023"), 1023, nil},
		{"too big", idgen.Twitter, ptr("1024"), 0, idgen.ErrNodeRange},
		{"negative", idgen.Twitter, ptr("-1"), 0, idgen.ErrNodeRange},
		{"overflow", idgen.Twitter, ptr("99999999999999999999"), 0, idgen.ErrNodeRange},
		{"worker too big", idgen.Twitter, ptr("0:32"), 0, idgen.ErrNodeRange},
		{"no datacenter bits", idgen.JSSafe, ptr("1:5"), 0, idgen.ErrNodeRange},
		{"not a number", idgen.Twitter, ptr("node-1"), 0, idgen.ErrSyntax},
		{"half", idgen.Twitter, ptr("1:"), 0, idgen.ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.value != nil {
				t.Setenv(key, *tt.value)
			}
			got, err := idgen.NodeFromEnv(tt.layout, key)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("NodeFromEnv = %d, %v; want %d, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestNodeFromHostname(t *testing.T) {
	tests := []struct {
		host string
		want int64
		err  error
	}{
		{"ingest-0", 0, nil},
		{"ingest-7", 7, nil},
		{"order-service-12", 12, nil},
		{"web-3.web.default.svc.cluster.local", 3, nil},
		{"web-1023", 1023, nil},
		{"web-1024", 0, idgen.ErrNodeRange},
		{"web-99999999999999999999", 0, idgen.ErrNodeRange},
		{"web", 0, idgen.ErrNoNode},
		{"web-", 0, idgen.ErrNoNode},
		{"-3", 0, idgen.ErrNoNode},
		{"web-3a", 0, idgen.ErrNoNode},
		{"", 0, idgen.ErrNoNode},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, err := idgen.NodeFromHostname(idgen.Twitter, tt.host)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("NodeFromHostname = %d, %v; want %d, %v", got, err, tt.want, tt.err)
			}
		})
	}
}
