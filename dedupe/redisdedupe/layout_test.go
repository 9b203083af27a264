package redisdedupe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

func TestNew(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	tests := []struct {
		name   string
		client redis.UniversalClient
		cfg    redisdedupe.Config
		ok     bool
	}{
		{"Defaults", client, redisdedupe.Config{}, true},
		{"Prefix", client, redisdedupe.Config{Prefix: "app:"}, true},
		{"NilClient", nil, redisdedupe.Config{}, false},
		{"OpenBrace", client, redisdedupe.Config{Prefix: "a{"}, false},
		{"CloseBrace", client, redisdedupe.Config{Prefix: "}"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := redisdedupe.New(tt.client, tt.cfg); (err == nil) != tt.ok {
				t.Errorf("New(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		prefix string
		ref    dedupe.Ref
		want   string
	}{
		{"", dedupe.Ref{Group: "g", Key: "k"}, "idemq:dedupe:{:g}:k"},
		{"app:", dedupe.Ref{Namespace: "n", Group: "g", Key: "k"}, "app:{n:g}:k"},
		{"", dedupe.Ref{Namespace: "a:b", Group: "{x}", Key: "*"}, "idemq:dedupe:{a%3Ab:%7Bx%7D}:*"},
		{"", dedupe.Ref{Namespace: "%", Group: "}", Key: "{}:"}, "idemq:dedupe:{%25:%7D}:{}:"},
		{"", dedupe.Ref{Namespace: "a", Group: "b:c", Key: "k"}, "idemq:dedupe:{a:b%3Ac}:k"},
		{"", dedupe.Ref{Namespace: "a:b", Group: "c", Key: "k"}, "idemq:dedupe:{a%3Ab:c}:k"},
		{"", dedupe.Ref{Group: "é", Key: "🙂"}, "idemq:dedupe:{:é}:🙂"},
	}
	client := redis.NewClient(&redis.Options{})
	defer client.Close()
	for _, tt := range tests {
		s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: tt.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if got := redisdedupe.Key(s, tt.ref); got != tt.want {
			t.Errorf("Key(%#v) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster maps keys to slots with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// hashTag returns the part of key Redis Cluster hashes: the text between the
// first '{' and the first '}' after it, if that is not empty; else the key.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

func slot(key string) int { return int(crc16(hashTag(key)) % 16384) }

// TestSlotFunction checks the test's slot function against slots Redis
// documents, so that TestBatchSlot proves something.
func TestSlotFunction(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{
		"foo":                  12182,
		"{user1000}.following": slot("{user1000}.followers"),
		"foo{}{bar}":           int(crc16("foo{}{bar}") % 16384),
		"foo{{bar}}zap":        int(crc16("{bar") % 16384),
		"foo{bar}{zap}":        int(crc16("bar") % 16384),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestBatchSlot checks that all keys of one (namespace, group) hash to one
// cluster slot whatever the key holds, and that the hash tag is exactly the
// namespace and group.
func TestBatchSlot(t *testing.T) {
	client := redis.NewClient(&redis.Options{})
	defer client.Close()
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"k", "{", "}", "{}", "}{", "{x}", "a:b", "*", "%7D", strings.Repeat("}", msgkey.MaxLen)}
	for _, scope := range []struct{ ns, group, tag string }{
		{"", "g", ":g"},
		{"ns", "orders-consumer", "ns:orders-consumer"},
		{"{", "}", "%7B:%7D"},
		{"a:b", "c%d", "a%3Ab:c%25d"},
		{"", "}{", ":%7D%7B"},
	} {
		want := int(crc16(scope.tag) % 16384)
		for _, k := range keys {
			key := redisdedupe.Key(s, dedupe.Ref{Namespace: scope.ns, Group: scope.group, Key: k})
			if tag := hashTag(key); tag != scope.tag {
				t.Errorf("hash tag of %q = %q, want %q", key, tag, scope.tag)
			}
			if got := slot(key); got != want {
				t.Errorf("slot(%q) = %d, want %d, the slot of its group", key, got, want)
			}
		}
	}
}

// TestRecord checks what a record looks like in Redis: its state and a TTL
// that Redis keeps.
func TestRecord(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := dedupe.Ref{Namespace: "record", Group: t.Name(), Key: "a*"}
	client.Del(ctx, redisdedupe.Key(s, r))
	res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: r, Fingerprint: "fp"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	check := func(state string, ttl time.Duration) {
		t.Helper()
		v, err := client.Get(ctx, redisdedupe.Key(s, r)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := state + res.Token + "fp"; v != want {
			t.Errorf("record = %q, want %q", v, want)
		}
		if got := client.PTTL(ctx, redisdedupe.Key(s, r)).Val(); got <= ttl-time.Second || got > ttl {
			t.Errorf("record TTL = %v, want about %v", got, ttl)
		}
	}
	check("p", time.Minute)
	if err := s.Extend(ctx, dedupe.Ticket{Ref: r, Token: res.Token}, time.Hour); err != nil {
		t.Fatal(err)
	}
	check("p", time.Hour)
	if err := testkit.Complete(ctx, s, dedupe.Ticket{Ref: r, Token: res.Token}, 72*time.Hour); err != nil {
		t.Fatal(err)
	}
	check("d", 72*time.Hour)
	if n := client.Exists(ctx, strings.Replace(redisdedupe.Key(s, r), "a*", "ab", 1)).Val(); n != 0 {
		t.Errorf("a record for key ab exists")
	}
}

// countHook records the commands and pipelines a client runs, leaving out
// the commands that set up connections.
type countHook struct {
	mu        sync.Mutex
	cmds      []string
	pipelines []string
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.cmds = append(h.cmds, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.pipelines = append(h.pipelines, tally(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// tally sums up a pipeline as its commands' names with their counts, in
// order of name: "evalsha*3" or "get*2 pexpiretime*2 pttl*2".
func tally(cmds []redis.Cmder) string {
	n := map[string]int{}
	for _, c := range cmds {
		n[c.Name()]++
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s*%d", name, n[name]))
	}
	return strings.Join(out, " ")
}

// take returns what the client ran since the last take.
func (h *countHook) take() (cmds, pipelines []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds, pipelines = h.cmds, h.pipelines
	h.cmds, h.pipelines = nil, nil
	return cmds, pipelines
}

// claimAll claims reqs in one batch, all of which must be free, and returns
// their tickets.
func claimAll(t *testing.T, s *redisdedupe.Store, reqs []dedupe.Item) []dedupe.Ticket {
	t.Helper()
	res, errs, err := s.Claim(t.Context(), reqs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ts []dedupe.Ticket
	for i, r := range res {
		if r.Outcome != dedupe.Acquired || errs[i] != nil {
			t.Fatalf("item %d = %v, %v; want acquired", i, r.Outcome, errs[i])
		}
		ts = append(ts, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token})
	}
	return ts
}

// TestRoundTrips checks the commands a store sends. Its claims of a batch
// are one pipeline of SET, whatever groups it spans, after one INFO on its
// first claim; on the script path, one EVALSHA per group (a pipeline of
// them when it spans groups) and no INFO. A claim whose SETs find records
// reads them in a second pipeline. Completions and releases are
// scripts on either path, sent again by EVAL after Redis lost its scripts.
func TestRoundTrips(t *testing.T) {
	ctx := t.Context()
	// A Redis of its own: SCRIPT FLUSH below is server-wide, and the other
	// packages' tests on the shared Redis load the same scripts again.
	client := redis.NewClient(&redis.Options{Addr: testenv.StartPrivateRedis(t).Addr()})
	t.Cleanup(func() { client.Close() })
	hook := &countHook{}
	client.AddHook(hook)
	type want struct{ cmds, pipelines []string }
	check := func(t *testing.T, what string, w want) {
		t.Helper()
		if cmds, pipes := hook.take(); !slices.Equal(cmds, w.cmds) || !slices.Equal(pipes, w.pipelines) {
			t.Errorf("%s sent %q and pipelines %q; want %q and %q", what, cmds, pipes, w.cmds, w.pipelines)
		}
	}
	for _, p := range paths {
		native := p.name == "Native"
		// pick returns the native path's answer or the script path's.
		pick := func(n, s want) want {
			if native {
				return n
			}
			return s
		}
		t.Run(p.name, func(t *testing.T) {
			s, err := redisdedupe.New(client, redisdedupe.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p.use(s)
			batch := func(groups ...string) []dedupe.Item {
				var reqs []dedupe.Item
				for i := range 32 {
					g := groups[i%len(groups)]
					reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Namespace: "trips", Group: g, Key: fmt.Sprint(i)}})
				}
				return reqs
			}
			id := t.Name() + fmt.Sprint(time.Now().UnixNano())

			// Load the scripts.
			ts := claimAll(t, s, batch(id+"warm"))
			if errs, err := s.Complete(ctx, ts[:16], time.Minute); err != nil || errs[0] != nil {
				t.Fatal(errs, err)
			}
			if errs, err := s.Release(ctx, ts[16:]); err != nil || errs[0] != nil {
				t.Fatal(errs, err)
			}
			infos, _ := hook.take()
			infos = slices.DeleteFunc(infos, func(name string) bool { return name != "info" })
			if want := pick(want{cmds: []string{"info"}}, want{}).cmds; !slices.Equal(infos, want) {
				t.Errorf("the first claims sent %q, want %q", infos, want)
			}

			one := batch(id + "one")
			ts = claimAll(t, s, one)
			if _, err := s.Complete(ctx, ts, time.Minute); err != nil {
				t.Fatal(err)
			}
			check(t, "claim and complete of one group", pick(
				want{[]string{"evalsha"}, []string{"set*32"}},
				want{[]string{"evalsha", "evalsha"}, nil}))

			if _, _, err := s.Claim(ctx, one, time.Minute); err != nil {
				t.Fatal(err)
			}
			check(t, "a claim of done keys", pick(
				want{nil, []string{"set*32", "get*64 pexpiretime*32 pttl*32"}},
				want{[]string{"evalsha"}, nil}))

			ts = claimAll(t, s, batch(id+"a", id+"b", id+"c"))
			if _, err := s.Release(ctx, ts); err != nil {
				t.Fatal(err)
			}
			check(t, "claim and release over three groups", pick(
				want{nil, []string{"set*32", "evalsha*3"}},
				want{nil, []string{"evalsha*3", "evalsha*3"}}))

			// After SCRIPT FLUSH each part runs once more, through EVAL:
			// had it run twice, its keys would answer in flight, or lose
			// their lease.
			for _, groups := range [][]string{{id + "flush1"}, {id + "flush2", id + "flush3"}} {
				if err := client.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				ts := claimAll(t, s, batch(groups...))
				errs, err := s.Complete(ctx, ts, time.Minute)
				if err != nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
					t.Fatalf("Complete after SCRIPT FLUSH = %v, %v", errs, err)
				}
				if cmds, _ := hook.take(); !slices.Contains(cmds, "eval") {
					t.Errorf("after SCRIPT FLUSH the store sent %v, want an eval", cmds)
				}
			}
		})
	}
}

// loseFirstPipeline, once armed, lets the next pipeline of claims (SET or
// EVALSHA) reach Redis, then reports it failed, as a connection dropped
// before the answers arrive.
type loseFirstPipeline struct {
	mu    sync.Mutex
	armed bool
}

func (h *loseFirstPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loseFirstPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loseFirstPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		if name := cmds[0].Name(); !h.armed || name != "set" && name != "evalsha" {
			return err
		}
		h.armed = false
		lost := errors.New("connection dropped")
		for _, c := range cmds {
			c.SetErr(lost)
		}
		return lost
	}
}

// TestLostPipelineGivesClaimsBack claims a batch spanning two groups, whose
// pipeline runs on Redis but whose answer is lost: the claims it took are
// given back, so the keys can be claimed at once instead of after a lease.
func TestLostPipelineGivesClaimsBack(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			client := newClient(t)
			hook := &loseFirstPipeline{}
			client.AddHook(hook)
			s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: "lost:" + rand.Text() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			p.use(s)
			testLostPipeline(t, s, hook)
		})
	}
}

func testLostPipeline(t *testing.T, s *redisdedupe.Store, hook *loseFirstPipeline) {
	batch := func(keys ...string) []dedupe.Item {
		var reqs []dedupe.Item
		for _, g := range []string{"g1", "g2"} {
			for _, k := range keys {
				reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Group: g, Key: k}})
			}
		}
		return reqs
	}
	// Load the scripts and learn the server's version, so that the lost
	// pipeline really claims.
	if _, _, err := s.Claim(t.Context(), batch("warm"), time.Hour); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	hook.armed = true
	hook.mu.Unlock()
	reqs := batch("a", "b")
	if _, _, err := s.Claim(t.Context(), reqs, time.Hour); err == nil {
		t.Fatal("Claim succeeded although its answer was lost")
	}
	res, _, err := s.Claim(t.Context(), reqs, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != dedupe.Acquired {
			t.Errorf("%s after the lost batch: %v, want acquired", reqs[i].Ref, r.Outcome)
		}
	}
}

// TestRecordAcrossVersions checks a done record that keeps its
// completion's trace, and a rolling upgrade both ways: the claim script of
// the versions before traces (copied here) reads such a record as done,
// with the same payload of another fingerprint kind, and this version
// reads their records, without a trace.
func TestRecordAcrossVersions(t *testing.T) {
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	// The claim script before traces: its fingerprint is the rest of the
	// record.
	before := redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == nil or v == false then return 1 end
local had, fp = string.sub(v, 28), string.sub(ARGV[1], 28)
if #had == #fp and had ~= fp then return 4 end
if string.sub(v, 1, 1) == 'd' then return 2 end
return 3
`)
	ctx := t.Context()
	client := newClient(t)
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := dedupe.Ref{Namespace: "record", Group: t.Name(), Key: "k"}
	key := redisdedupe.Key(s, r)
	client.Del(ctx, key)
	const fp = "0123456789abcdef"
	res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: r, Fingerprint: fp}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := testkit.Complete(ctx, s, dedupe.Ticket{Ref: r, Token: res.Token, Trace: trace}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v := client.Get(ctx, key).Val(); v != "d"+res.Token+fp+"\n"+trace {
		t.Errorf("record = %q, want state, token, fingerprint, newline, trace", v)
	}
	for _, claimFP := range []string{fp, "fedcba9876543210"} {
		rec := "p" + strings.Repeat("A", 26) + claimFP
		if code, err := before.Run(ctx, client, []string{key}, rec).Int(); err != nil || code != 2 {
			t.Errorf("the claim before traces, fingerprint %s, answered %d, %v; want 2 (done)", claimFP, code, err)
		}
	}
	// A record of a version before traces.
	client.Set(ctx, key, "d"+res.Token+fp, time.Hour)
	for _, path := range paths {
		path.use(s)
		got, err := testkit.Claim(ctx, s, dedupe.Item{Ref: r, Fingerprint: fp}, time.Minute)
		if err != nil || got.Outcome != dedupe.Suppressed || got.Trace != "" {
			t.Errorf("%s: a record before traces = %v with trace %q, %v; want suppressed without", path.name, got.Outcome, got.Trace, err)
		}
		if got, _ := testkit.Claim(ctx, s, dedupe.Item{Ref: r, Fingerprint: "fedcba9876543210"}, time.Minute); got.Outcome != dedupe.Reused {
			t.Errorf("%s: another payload = %v, want reused", path.name, got.Outcome)
		}
	}
}
