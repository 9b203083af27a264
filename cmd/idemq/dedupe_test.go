package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
)

// openDedupe opens the dedupe store at rawURL in process, its table created,
// as a consumer would.
func openDedupe(t *testing.T, rawURL string) dedupe.Store {
	t.Helper()
	ctx := context.Background()
	a, err := parseStore(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind == kindRedis {
		rdb := redis.NewClient(a.Redis)
		t.Cleanup(func() { rdb.Close() })
		s, err := redisdedupe.New(rdb, redisdedupe.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	db, err := sql.Open(a.Driver, a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqldedupe.New(db, a.Dialect, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

type listOutput struct {
	Records []record `json:"records"`
	Next    string   `json:"next"`
}

type forgetOutput struct {
	DryRun  bool     `json:"dry_run"`
	Records []record `json:"records"`
}

type statsOutput struct {
	Namespace  string `json:"namespace"`
	Group      string `json:"group"`
	Processing int64  `json:"processing"`
	Done       int64  `json:"done"`
	Total      int64  `json:"total"`
}

// TestDedupe runs every dedupe command through the built binary against
// records a consumer wrote, on each store.
func TestDedupe(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			testDedupe(t, b)
		})
	}
}

func testDedupe(t *testing.T, b backend) {
	ctx := context.Background()
	storeURL := b.url(t)
	s := openDedupe(t, storeURL)
	ns, group := unique("ns"), unique("group")
	ref := func(k string) dedupe.Ref { return dedupe.Ref{Namespace: ns, Group: group, Key: k} }
	claim := func(k, fp string) dedupe.Ticket {
		t.Helper()
		res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref(k), Fingerprint: fp}, time.Hour)
		if err != nil || res.Outcome != dedupe.Acquired {
			t.Fatalf("claim %s: %+v, %v", k, res, err)
		}
		return dedupe.Ticket{Ref: ref(k), Token: res.Token}
	}
	// order-1's completion names the run that applied it; Redis keeps it.
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	done := func(k, fp string) {
		t.Helper()
		tk := claim(k, fp)
		if k == "order-1" {
			tk.Trace = trace
		}
		if err := testkit.Complete(ctx, s, tk, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	fp := dedupekit.Fingerprint([]byte("order 1"))
	done("order-1", fp)
	held := claim("order-2", "")
	done("a*1", "")
	for i := range 5 {
		done(fmt.Sprintf("bulk-%02d", i), "")
	}
	// A record of another group is never shown.
	if _, err := testkit.Claim(ctx, s, dedupe.Item{Ref: dedupe.Ref{Namespace: ns, Group: group + "x", Key: "order-1"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	common := []string{"--store", storeURL, "--namespace", ns, "--group", group}
	cli := func(args ...string) result {
		t.Helper()
		return idemq(t, nil, append(args[:2:2], append(common, args[2:]...)...)...)
	}

	t.Run("get", func(t *testing.T) {
		var got []record
		mustJSON(t, cli("dedupe", "get", "--json", "order-1", "order-2"), &got)
		if len(got) != 2 || got[0].Key != "order-1" || got[0].State != stateDone || got[0].Fingerprint != fp ||
			got[1].Key != "order-2" || got[1].State != stateProcessing || got[1].Fingerprint != "" {
			t.Fatalf("got %+v", got)
		}
		for _, r := range got {
			exp, err := time.Parse(timeFormat, r.Expires)
			if err != nil || exp.Before(time.Now().Add(50*time.Minute)) || exp.After(time.Now().Add(70*time.Minute)) {
				t.Errorf("%s expires %q, want about an hour from now (%v)", r.Key, r.Expires, err)
			}
			if (b.name == "Redis") != (r.Updated == "") {
				t.Errorf("%s updated %q: SQL keeps the time, Redis does not", r.Key, r.Updated)
			}
		}
		if want := map[bool]string{true: trace}[b.name == "Redis"]; got[0].Trace != want || got[1].Trace != "" {
			t.Errorf("traces %q and %q, want %q (Redis keeps the applying run's, SQL none) and none", got[0].Trace, got[1].Trace, want)
		}
		r := cli("dedupe", "get", "order-1", "nope")
		wantFail(t, r, exitFailure, "no live record for 1 of 2 keys")
		if !regexp.MustCompile(`(?m)^nope +none +- +- +- +-$`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^order-1 +done `).MatchString(r.stdout) {
			t.Errorf("table:\n%s", r.stdout)
		}
	})

	t.Run("list", func(t *testing.T) {
		var all listOutput
		mustJSON(t, cli("dedupe", "list", "--json", "--all", "--limit", "3"), &all)
		keys := map[string]string{}
		for _, r := range all.Records {
			keys[r.Key] = r.State
		}
		if len(all.Records) != 8 || len(keys) != 8 || keys["order-2"] != stateProcessing || keys["bulk-04"] != stateDone || all.Next != "" {
			t.Fatalf("listed %+v", all)
		}
		var pre listOutput
		mustJSON(t, cli("dedupe", "list", "--json", "--all", "--prefix", "a*"), &pre)
		if len(pre.Records) != 1 || pre.Records[0].Key != "a*1" {
			t.Errorf("prefix a*: %+v", pre)
		}
		if b.name == "Redis" {
			return // SCAN pages have no fixed size
		}
		var p1, p2 listOutput
		mustJSON(t, cli("dedupe", "list", "--json", "--prefix", "bulk-", "--limit", "3"), &p1)
		if len(p1.Records) != 3 || p1.Records[0].Key != "bulk-00" || p1.Next == "" {
			t.Fatalf("first page %+v", p1)
		}
		mustJSON(t, cli("dedupe", "list", "--json", "--prefix", "bulk-", "--limit", "3", "--cursor", p1.Next), &p2)
		if len(p2.Records) != 2 || p2.Records[0].Key != "bulk-03" || p2.Next != "" {
			t.Fatalf("second page %+v", p2)
		}
		r := cli("dedupe", "list", "--prefix", "bulk-", "--limit", "3")
		if r.code != 0 || !strings.Contains(r.stdout, "next page: --cursor ") {
			t.Errorf("table:\n%v", r)
		}
	})

	t.Run("stats", func(t *testing.T) {
		var st statsOutput
		mustJSON(t, cli("dedupe", "stats", "--json"), &st)
		if st != (statsOutput{ns, group, 1, 7, 8}) {
			t.Fatalf("stats %+v", st)
		}
	})

	t.Run("forget", func(t *testing.T) {
		r := cli("dedupe", "forget", "order-1", "order-2", "nope")
		wantFail(t, r, exitUsage, "dry run: 2 of 3 keys", "--yes-reprocess", "nothing deleted")
		if !strings.Contains(r.stdout, "no (dry run)") {
			t.Errorf("dry run table:\n%s", r.stdout)
		}
		var still []record
		mustJSON(t, cli("dedupe", "get", "--json", "order-1", "order-2"), &still)
		if still[0].State != stateDone || still[1].State != stateProcessing {
			t.Fatalf("a dry run changed the records: %+v", still)
		}

		var got forgetOutput
		mustJSON(t, cli("dedupe", "forget", "--yes-reprocess", "--json", "order-1", "order-2", "nope"), &got)
		want := []struct {
			key, state string
			forgot     bool
		}{{"order-1", stateDone, true}, {"order-2", stateProcessing, true}, {"nope", stateNone, false}}
		if got.DryRun || len(got.Records) != 3 {
			t.Fatalf("forget: %+v", got)
		}
		for i, w := range want {
			r := got.Records[i]
			if r.Key != w.key || r.State != w.state || r.Forgotten == nil || *r.Forgotten != w.forgot {
				t.Errorf("forget record %d: %+v, want %+v", i, r, w)
			}
		}
		// The forgotten done key runs again; the forgotten holder has lost
		// its lease.
		res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref("order-1")}, time.Minute)
		if err != nil || res.Outcome != dedupe.Acquired {
			t.Errorf("claim of a forgotten key: %+v, %v; want Acquired", res, err)
		}
		if err := testkit.Complete(ctx, s, held, time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("complete of a forgotten lease: %v, want ErrLeaseLost", err)
		}
		var st statsOutput
		mustJSON(t, cli("dedupe", "stats", "--json"), &st)
		if st.Processing != 1 || st.Done != 6 {
			t.Errorf("stats after forget: %+v", st)
		}
	})
}
