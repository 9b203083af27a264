package redisdedupe_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// TestClaimAnswerLost drops the connection after Redis ran a claim's SET or
// script and before its answer arrives. go-redis sends the command again on
// a new connection (MaxRetries, 3 by default) with the same token; the
// claim must take the record it wrote as its own, not answer in flight to
// its own caller and block the key for a whole lease.
func TestClaimAnswerLost(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) { testClaimAnswerLost(t, p.use) })
	}
}

func testClaimAnswerLost(t *testing.T, use func(*redisdedupe.Store)) {
	tests := []struct {
		name   string
		groups []string // a batch spanning groups is a pipeline
		keys   []string
	}{
		{"Claim", []string{"g"}, []string{"a"}},
		{"ClaimMany", []string{"g"}, []string{"a", "b", "c"}},
		{"ClaimManyPipeline", []string{"g1", "g2"}, []string{"a", "b"}},
	}
	proxy := testenv.StartDropProxy(t, testenv.Redis(t))
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { client.Close() })
	prefix := "lost:" + rand.Text() + ":"
	s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	use(s)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var reqs []dedupe.Item
			for _, g := range tc.groups {
				for _, k := range tc.keys {
					reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Namespace: tc.name, Group: g, Key: k}})
				}
			}
			// A claim of other keys first loads the script (or learns the
			// server's version) and leaves a connection in the pool, so
			// the armed claim runs as is.
			warm := make([]dedupe.Item, len(reqs))
			for i, r := range reqs {
				warm[i] = r
				warm[i].Key = "warm-" + r.Key
			}
			if _, _, err := s.Claim(t.Context(), warm, time.Hour); err != nil {
				t.Fatal(err)
			}
			before := proxy.Dropped()
			proxy.Arm(prefix + "{" + tc.name + ":") // in this claim's keys only
			res, errs, err := s.Claim(t.Context(), reqs, time.Hour)
			if proxy.Dropped() == before {
				t.Fatal("the proxy dropped no answer")
			}
			if err != nil {
				t.Fatalf("claim whose first answer was lost: %v", err)
			}
			for i, r := range res {
				if errs[i] != nil || r.Outcome != dedupe.Acquired {
					t.Fatalf("claim %q whose first answer was lost = %v, %v; want acquired", reqs[i].Ref, r.Outcome, errs[i])
				}
				tk := dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}
				if err := testkit.Complete(t.Context(), s, tk, time.Hour); err != nil {
					t.Fatalf("Complete(%q) with the token the claim answered: %v", reqs[i].Ref, err)
				}
			}
			// Another claimant still finds the key taken.
			other, err := testkit.Claim(t.Context(), s, reqs[0], time.Hour)
			if err != nil || other.Outcome != dedupe.Suppressed {
				t.Errorf("Claim(%q) after completing = %v, %v; want done", reqs[0].Ref, other.Outcome, err)
			}
		})
	}
}
