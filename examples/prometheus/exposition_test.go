package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/outboxotel"
)

// An exposition is what one scrape of /metrics found: each sample name
// with the label names its samples carry.
type exposition map[string][]string

// sampleRE finds a sample line's name and labels.
var sampleRE = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)

// labelRE finds a label's name in a sample's labels.
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// scrape makes every idemq metric report through install's exporter and
// returns what a scrape of promhttp.Handler finds: an outbox table with a
// pending and a parked row, and consumers whose messages complete, repeat,
// fail, and meet a dedupe store that is down, run as the client adapters
// run them.
func scrape(t *testing.T) exposition {
	t.Helper()
	mp, err := install()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mp.Shutdown(context.Background()) })

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ob, err := outbox.New(db, dialect.SQLite, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.AddCommitted(t, db, ob, message("order-1"), message("order-2"))
	if _, err := ob.Park(t.Context(), "refused", 2); err != nil {
		t.Fatal(err)
	}
	reg, err := outboxotel.Register(mp, ob)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Unregister() })

	quiet := consumer.WithLogger(slog.New(slog.DiscardHandler))
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), "billing", quiet)
	if err != nil {
		t.Fatal(err)
	}
	fail := errors.New("handler failed")
	for _, m := range []struct {
		key  string
		err  error
		want string
	}{
		{"order-1", nil, "completed"},
		{"order-1", nil, "suppressed"},
		{"order-2", fail, "failed"},
	} {
		v := adapter.Process(t.Context(), c, []consumer.Message{delivered(m.key)}, func(context.Context, *consumer.Message) error { return m.err }, adapter.Waiting{}, nil)[0]
		if v.Outcome.String() != m.want {
			t.Fatalf("message %s: outcome %v, want %s", m.key, v.Outcome, m.want)
		}
	}
	// A Redis where nothing listens: the store is down. go-redis would
	// log each failed dial.
	redis.SetLogger(quietLogger{})
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	down, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := consumer.New(down, "audit", quiet, consumer.WithStoreDownWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	v := adapter.Process(t.Context(), c2, []consumer.Message{delivered("order-3")}, func(context.Context, *consumer.Message) error { return nil }, adapter.Waiting{}, nil)[0]
	if v.Outcome.String() != "store-down" {
		t.Fatalf("with the store down: outcome %v", v.Outcome)
	}
	drain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adapter.Drain(drain, c2, func() error { return nil }); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	exp := exposition{}
	for _, m := range sampleRE.FindAllStringSubmatch(string(text), -1) {
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(exp[m[1]], l[1]) {
				exp[m[1]] = append(exp[m[1]], l[1])
			}
		}
		if _, ok := exp[m[1]]; !ok {
			exp[m[1]] = nil
		}
	}
	return exp
}

// quietLogger discards go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func message(key string) outbox.Message {
	return outbox.Message{Topic: "orders", Body: []byte(key), Properties: map[string]string{msgkey.Property: key}}
}

func delivered(key string) consumer.Message {
	return consumer.Message{ID: key, Topic: "orders", Properties: map[string]string{msgkey.Property: key}, Body: []byte(key)}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// metricRE finds the idemq metrics a PromQL expression reads.
var metricRE = regexp.MustCompile(`\bidemq_[a-z0-9_]+`)

// byRE and matcherRE find the labels a PromQL expression names.
var (
	byRE      = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
)

// scrapeLabels are the labels Prometheus adds at a scrape, which the
// exposition does not hold.
var scrapeLabels = []string{"job", "instance"}

// checkQueries fails t for each metric or label that an expression of
// what reads and the exposition lacks, and returns the metrics read.
func checkQueries(t *testing.T, exp exposition, what string, exprs []string) []string {
	t.Helper()
	var read []string
	for _, e := range exprs {
		// Label names look like metric names: take them out first.
		names := metricRE.FindAllString(matcherRE.ReplaceAllString(byRE.ReplaceAllString(e, ""), `"`), -1)
		if len(names) == 0 {
			t.Errorf("%s: %q reads no idemq metric", what, e)
		}
		var labels []string
		for _, m := range matcherRE.FindAllStringSubmatch(e, -1) {
			labels = append(labels, m[1])
		}
		for _, m := range byRE.FindAllStringSubmatch(e, -1) {
			for l := range strings.SplitSeq(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
		}
		for _, n := range names {
			have, ok := exp[n]
			if !ok {
				t.Errorf("%s reads %s, which the exposition lacks", what, n)
				continue
			}
			read = append(read, n)
			for _, l := range labels {
				if !slices.Contains(have, l) && !slices.Contains(scrapeLabels, l) && !anyHas(exp, names, l) {
					t.Errorf("%s: %q groups or matches by label %s, which %s lacks", what, e, l, n)
				}
			}
		}
	}
	slices.Sort(read)
	return slices.Compact(read)
}

// anyHas reports whether one of the metrics names has label l: in an
// expression over several metrics a label may belong to one of them.
func anyHas(exp exposition, names []string, l string) bool {
	for _, n := range names {
		if slices.Contains(exp[n], l) {
			return true
		}
	}
	return false
}

// TestExposition scrapes the real exposition and checks that every metric
// and label the alert rules and the dashboard read is in it, under its
// Prometheus name, and that together they read every idemq metric.
func TestExposition(t *testing.T) {
	exp := scrape(t)
	var idemq []string
	for n := range exp {
		if strings.HasPrefix(n, "idemq_") {
			idemq = append(idemq, n)
		}
	}
	slices.Sort(idemq)
	t.Logf("idemq metrics exposed: %s", strings.Join(idemq, " "))
	rules := checkQueries(t, exp, "alerts.yml", ruleExprs(t))
	board := checkQueries(t, exp, "dashboard.json", dashboardExprs(t))
	for _, n := range idemq {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		read := func(names []string) bool {
			return slices.ContainsFunc(names, func(r string) bool { return strings.HasPrefix(r, family) })
		}
		if !read(rules) && !read(board) {
			t.Errorf("%s is exposed, but neither the rules nor the dashboard read it", n)
		}
	}
}

// ruleExprs returns the expr of every rule of alerts.yml: a line
// "expr: EXPR" or a block "expr: |" and its lines indented deeper.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	lines := strings.Split(string(src), "\n")
	for i := 0; i < len(lines); i++ {
		indent, rest, ok := strings.Cut(lines[i], "expr: ")
		if !ok || strings.TrimSpace(indent) != "" {
			continue
		}
		if rest != "|" {
			exprs = append(exprs, rest)
			continue
		}
		var block []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], indent+"  ") {
			i++
			block = append(block, strings.TrimSpace(lines[i]))
		}
		exprs = append(exprs, strings.Join(block, " "))
	}
	if len(exprs) < 5 {
		t.Fatalf("alerts.yml: found %d exprs; the parsing is off", len(exprs))
	}
	return exprs
}
