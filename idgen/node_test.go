package idgen_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

func TestNodeFromHostname(t *testing.T) {
	tests := []struct {
		name string
		host string
		want int64
		err  error
		// why is a part of the error message that says why the name
		// was refused.
		why string
	}{
		{"first pod", "ingest-0", 0, nil, ""},
		{"pod", "ingest-7", 7, nil, ""},
		{"dashed set", "order-service-12", 12, nil, ""},
		{"set ending in a digit", "kafka2-3", 3, nil, ""},
		{"set with a version", "redis-v2-1", 1, nil, ""},
		{"FQDN", "web-3.web.default.svc.cluster.local", 3, nil, ""},
		{"max", "web-1023", 1023, nil, ""},
		{"over max", "web-1024", 0, idgen.ErrInvalidConfig, ""},
		{"overflow", "web-99999999999999999999", 0, idgen.ErrInvalidConfig, ""},
		{"no ordinal", "web", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"empty ordinal", "web-", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"no set", "-3", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"letters in ordinal", "web-3a", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"empty", "", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"FQDN without ordinal", "web.default.svc", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"set ending in a dash", "web--3", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"upper case", "Web-3", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"underscore", "web_a-3", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		{"control character", "0\n0-0", 0, idgen.ErrInvalidConfig, "-<ordinal>"},
		// Names that end in a number without being a StatefulSet's pod.
		{"IP-like", "ip-10-0-0-1", 0, idgen.ErrInvalidConfig, "address"},
		{"IP-like, other subnet", "ip-10-0-7-1", 0, idgen.ErrInvalidConfig, "address"},
		{"IP-like FQDN", "ip-172-31-5-9.ec2.internal", 0, idgen.ErrInvalidConfig, "address"},
		{"set ending in -<digits>", "kafka-1-0", 0, idgen.ErrInvalidConfig, "address"},
		{"Deployment pod", "web-5d8f7c9b4-24567", 0, idgen.ErrInvalidConfig, "Deployment"},
		{"Deployment pod, 10-char hash", "api-gateway-7c9b4d8f65-22222", 0, idgen.ErrInvalidConfig, "Deployment"},
		{"Deployment pod, 8-char hash", "web-5d8f7c9b-98765", 0, idgen.ErrInvalidConfig, "Deployment"},
		{"leading zero", "web-07", 0, idgen.ErrInvalidConfig, "leading zero"},
		{"zero with a leading zero", "web-00", 0, idgen.ErrInvalidConfig, "leading zero"},
		{"leading zero overflow", "web-099999999999999999999", 0, idgen.ErrInvalidConfig, "leading zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idgen.NodeFromHostname(idgen.Twitter, tt.host)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("NodeFromHostname(%q) = %d, %v; want %d, %v", tt.host, got, err, tt.want, tt.err)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if !strings.Contains(msg, strconv.Quote(tt.host)) || !strings.Contains(msg, tt.why) {
				t.Errorf("error %q does not name the host and say %q", msg, tt.why)
			}
			if tt.why != "" && !strings.Contains(msg, "assign one yourself") {
				t.Errorf("error %q does not say what to use instead", msg)
			}
		})
	}
}

// Wider layouts hold ordinals that look like generated suffixes; only the
// shape of the name decides.
func TestNodeFromHostnameWideLayout(t *testing.T) {
	wide := idgen.Sonyflake
	tests := []struct {
		name string
		host string
		want int64
		err  error
	}{
		{"five-digit ordinal", "web-24567", 24567, nil},
		{"Deployment pod", "web-5d8f7c9b4-24567", 0, idgen.ErrInvalidConfig},
		{"hash too short for a ReplicaSet", "web-5d8f7c9-24567", 24567, nil},
		{"hash with a vowel", "web-5d8f7c9a4-24567", 24567, nil},
		{"suffix with a 0", "web-5d8f7c9b4-24560", 24560, nil},
		{"suffix too long", "web-5d8f7c9b4-245678", 0, idgen.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idgen.NodeFromHostname(wide, tt.host)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("NodeFromHostname(%q) = %d, %v; want %d, %v", tt.host, got, err, tt.want, tt.err)
			}
		})
	}
}
