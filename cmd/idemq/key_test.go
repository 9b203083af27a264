package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// addKeyed adds one committed row per topic to the outbox at storeURL, each
// holding key, as a service that adds a message again would.
func addKeyed(t *testing.T, storeURL, key string, topics ...string) {
	t.Helper()
	o, db := openOutbox(t, storeURL)
	for _, topic := range topics {
		testkit.AddCommitted(t, db, o, outbox.Message{Topic: topic, Body: []byte("x"), Properties: map[string]string{msgkey.Property: key}})
	}
}

// TestKey reports a key that two outbox rows hold, one of them parked, and
// that one of two groups completed, on each dedupe store (the outbox in
// the same database, or in SQLite beside Redis); a key found nowhere and a
// dedupe store that is down exit 1, the rest of the report printed.
func TestKey(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storeURL, outboxURL := b.url(t), ""
			if strings.HasPrefix(storeURL, "redis") {
				outboxURL = sqliteBackend.url(t)
			} else {
				outboxURL = storeURL
			}
			if r := idemq(t, nil, "migrate", "--store", outboxURL, "--outbox"); r.code != 0 {
				t.Fatalf("migrate: %v", r)
			}
			key, done, other := unique("order"), unique("billing"), unique("audit")
			addKeyed(t, outboxURL, key, "orders", "orders")
			o, _ := openOutbox(t, outboxURL)
			rows, err := o.Find(t.Context(), key)
			if err != nil || len(rows) != 2 {
				t.Fatalf("Find: %+v, %v", rows, err)
			}
			if n, err := o.Park(t.Context(), "refused for good", rows[1].ID); err != nil || n != 1 {
				t.Fatalf("Park: %d, %v", n, err)
			}
			s := openDedupe(t, storeURL)
			ref := dedupe.Ref{Group: done, Key: key}
			res, err := testkit.Claim(t.Context(), s, dedupe.Item{Ref: ref}, time.Hour)
			if err != nil || res.Outcome != dedupe.Acquired {
				t.Fatalf("claim: %+v, %v", res, err)
			}
			if err := testkit.Complete(t.Context(), s, dedupe.Ticket{Ref: ref, Token: res.Token}, time.Hour); err != nil {
				t.Fatal(err)
			}

			args := []string{"key", key, "--outbox", outboxURL, "--store", storeURL, "--group", done, "--group", other}
			var rep keyReport
			mustJSON(t, idemq(t, nil, append(args, "--json")...), &rep)
			if rep.Key != key || rep.Broker != nil || rep.Outbox == nil || rep.Dedupe == nil {
				t.Fatalf("report: %+v", rep)
			}
			if r := rep.Outbox.Rows; len(r) != 2 || r[0].State != "pending" || r[1].State != "parked" || r[1].LastError != "refused for good" || r[0].Topic != "orders" || r[0].Key != key {
				t.Errorf("outbox rows: %+v", r)
			}
			if g := rep.Dedupe.Groups; len(g) != 2 || g[0].Group != done || g[0].State != stateDone || g[1].Group != other || g[1].State != stateNone {
				t.Errorf("dedupe groups: %+v", g)
			}
			r := idemq(t, nil, args...)
			for _, re := range []string{`(?m)^\d+ +pending +orders +- +0 `, `(?m)^\d+ +parked +orders .* refused for good$`, `(?m)^` + done + ` +done `, `(?m)^` + other + ` +none +- +- +- +-$`} {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					t.Errorf("table lacks %s:\n%v", re, r)
				}
			}

			wantFail(t, idemq(t, nil, "key", unique("never"), "--outbox", outboxURL, "--store", storeURL, "--group", done), exitFailure, "found nowhere")

			down := "redis://127.0.0.1:" + closedPort(t) + "/0"
			r = idemq(t, nil, "key", key, "--outbox", outboxURL, "--store", down, "--group", done, "--json")
			wantFail(t, r, exitFailure, "dedupe: redis store at "+down, "check that the server runs and that --store (or IDEMQ_STORE) names it")
			rep = keyReport{}
			mustJSON(t, result{stdout: r.stdout}, &rep)
			if len(rep.Outbox.Rows) != 2 || rep.Dedupe.Error == "" {
				t.Errorf("with the dedupe store down, the report is %+v", rep)
			}
		})
	}
}

// TestKeyBadInput checks that a command line that cannot run exits 2 before
// it reaches any store or server, and that an outbox that is down or has no
// table, and a name server that is down, exit 1 saying which and what to do.
func TestKeyBadInput(t *testing.T) {
	t.Setenv(storeEnv, "")
	port := closedPort(t)
	down := "mysql://u:secret@127.0.0.1:" + port + "/app"
	for _, c := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no key", []string{"--outbox", down}, "missing KEY"},
		{"two keys", []string{"a", "b", "--outbox", down}, "one key at a time"},
		{"space in key", []string{"a b", "--outbox", down}, "holds space"},
		{"long key", []string{strings.Repeat("k", msgkey.MaxLen+1), "--outbox", down}, "limit 255"},
		{"nowhere to look", []string{"k"}, "nothing to look in"},
		{"topic without namesrv", []string{"k", "--outbox", down, "--topic", "orders"}, "--topic needs --namesrv"},
		{"namesrv without topics", []string{"k", "--namesrv", "127.0.0.1:" + port}, "--namesrv needs topics"},
		{"store without group", []string{"k", "--outbox", down, "--store", down}, "only --group reads"},
		{"group without store", []string{"k", "--group", "g"}, "no store: set --store URL"},
		{"empty group", []string{"k", "--group", "", "--store", down}, `--group "": idemq: invalid message key: empty group`},
		{"outbox on redis", []string{"k", "--outbox", "redis://127.0.0.1:" + port}, "is a Redis store"},
		{"bad outbox URL", []string{"k", "--outbox", "ftp://x"}, "--outbox: store URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := inProcess(t, "", append([]string{"key"}, c.args...)...)
			wantFail(t, r, exitUsage, c.msg)
			if strings.Contains(r.stderr, "secret") {
				t.Errorf("stderr shows the password:\n%s", r.stderr)
			}
		})
	}

	r := idemq(t, nil, "key", "k", "--outbox", down)
	wantFail(t, r, exitFailure, "outbox: mysql store at mysql://u:xxxxx@127.0.0.1:"+port+"/app", "check that the server runs and that --outbox names it")
	if !strings.Contains(r.stdout, "OUTBOX ROWS") || strings.Contains(r.stdout+r.stderr, "secret") {
		t.Errorf("report:\n%v", r)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantFail(t, idemq(t, nil, "key", "k", "--outbox", "sqlite://"+empty, "--outbox-table", "out2"), exitFailure,
		`table "out2" does not exist`, "'idemq migrate --outbox --outbox-table out2'")
	wantFail(t, idemq(t, nil, "key", "k", "--namesrv", "127.0.0.1:"+port, "--topic", "orders"), exitFailure,
		"broker: name server at 127.0.0.1:"+port, "check that it runs and that --namesrv names it")
}

// TestKeyBroker ships two rows that hold one key through 'idemq relay' to
// the real brokers, 4.x and 5.x, then finds both copies by the broker's Keys index: in the
// topic the outbox rows name, and in the one --topic names; a group's retry
// topic exists and holds none, its dead-letter topic does not exist.
func TestKeyBroker(t *testing.T) {
	for _, v := range []struct {
		name string
		// nameServer returns the broker's name server.
		nameServer func(testing.TB) string
	}{
		{"4.x", testenv.RocketMQ},
		{"5.x", func(t testing.TB) string { return testenv.RocketMQ5(t).NameServer }},
	} {
		t.Run(v.name, func(t *testing.T) {
			testKeyBroker(t, v.nameServer(t))
		})
	}
}

func testKeyBroker(t *testing.T, ns string) {
	store := sqliteBackend.url(t)
	if r := idemq(t, nil, "migrate", "--store", store, "--all"); r.code != 0 {
		t.Fatalf("migrate: %v", r)
	}
	topic, group, key := unique("keys"), unique("billing"), unique("order")
	for _, tp := range []string{topic, "%RETRY%" + group} {
		if err := testenv.CreateRocketMQTopic(t.Context(), ns, tp, 2); err != nil {
			t.Fatal(err)
		}
	}
	addKeyed(t, store, key, topic, topic)
	relay, _ := startDaemon(t, "relaying idemq_outbox at ", "relay", "--store", store, "--namesrv", ns)
	o, _ := openOutbox(t, store)
	testkit.WaitFor(t, "the rows sent", func() bool {
		st, err := o.Count(context.Background())
		return err == nil && st.Sent == 2
	})
	relay.stop()

	copies := func(rep keyReport) int {
		n := 0
		for _, tp := range rep.Broker.Topics {
			n += len(tp.Copies)
		}
		return n
	}
	var rep keyReport
	testkit.WaitFor(t, "the broker's index to hold both copies", func() bool {
		rep = keyReport{}
		r := idemq(t, nil, "key", key, "--outbox", store, "--store", store, "--group", group, "--namesrv", ns, "--json")
		mustJSON(t, result{stdout: r.stdout}, &rep)
		return r.code == 0 && copies(rep) == 2
	})
	tp := rep.Broker.Topics
	if len(tp) != 3 || tp[0].Topic != topic || tp[0].Why != "outbox row" || !tp[0].Exists ||
		tp[1].Topic != "%RETRY%"+group || !tp[1].Exists || len(tp[1].Copies) != 0 ||
		tp[2].Topic != "%DLQ%"+group || tp[2].Exists {
		t.Fatalf("topics: %+v", tp)
	}
	for _, c := range tp[0].Copies {
		if c.KeyProperty != key || c.MsgID == "" || c.Broker == "" || c.Stored == "" {
			t.Errorf("copy: %+v", c)
		}
	}
	if tp[0].Copies[0].MsgID == tp[0].Copies[1].MsgID {
		t.Errorf("two rows shipped one message id: %+v", tp[0].Copies)
	}

	r := idemq(t, nil, "key", key, "--namesrv", ns, "--topic", topic)
	if r.code != 0 || len(regexp.MustCompile(`(?m)^`+topic+` +\S+ +\d+ +\d+ `).FindAllString(r.stdout, -1)) != 2 {
		t.Errorf("--topic %s: want two copies:\n%v", topic, r)
	}
	wantFail(t, idemq(t, nil, "key", unique("never"), "--namesrv", ns, "--topic", topic), exitFailure, "found nowhere")
}

// FuzzDecodeMessages feeds the decoder of a broker's answer to a query by
// key what a broken or hostile broker might send: it answers messages or
// an error, and never panics the command.
func FuzzDecodeMessages(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 200, 0xda, 0xa3, 0x20, 0xa7})
	f.Add(bytes.Repeat([]byte{0xff}, 120))
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := decodeMessages(body)
		if err != nil && msgs != nil {
			t.Fatalf("decodeMessages returned %d messages with error %v", len(msgs), err)
		}
	})
}
