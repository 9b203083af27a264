package redisdedupe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/rediskey"
	"github.com/idemq/idemq/msgkey"
)

// Config holds a Store's optional settings. The zero value works.
type Config struct {
	// Prefix starts every key the store writes, so that its records stand
	// apart in a shared Redis. It must not hold '{' or '}', which would move
	// the cluster hash tag. Default "idemq:dedupe:".
	Prefix string
}

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = "idemq:dedupe:"
	}
}

// validate reports settings that cannot work.
func (c Config) validate() error {
	if strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("redisdedupe: prefix %q holds a brace, which would break the cluster hash tag", c.Prefix)
	}
	return nil
}

// Store is a dedupe store on Redis. It is safe for concurrent use.
//
// A record is one string key, [Store.Key]:
//
//	<Prefix>{<namespace>:<group>}:<key>
//
// where namespace and group have '%', '{', '}' and ':' percent-encoded so
// that no two Refs share a key, and the message key follows verbatim. Its
// value is the state ('p' processing or 'd' done), the 26-byte owner token
// and the payload fingerprint; its TTL is the lease or the retention.
//
// # Commands
//
// On Redis 7.0 or later a claim that finds no record is one native
// command per key,
//
//	SET key record NX PX lease
//
// A claim whose SET finds a record reads it in a second round trip (GET,
// PTTL, PEXPIRETIME, and GET again to check that the times read are that
// record's) and decides on it in the store: its own record (a SET sent
// again, see below), another payload's fingerprint, done, or in flight.
// Should the record change between the two GETs, or be gone, the claim
// script below answers for that key. A batch is one pipeline of SETs, and
// one of reads for the keys found taken. (SET with GET would answer the
// record in the same round trip, but answers nil to every claim that
// acquires, and go-redis (v9.22) spends 17 allocations classifying a nil
// reply as an error: most claims acquire, few find a record.)
//
// Complete, Release and Extend change a record only if the caller's token
// owns it, a condition Redis 7 cannot check in a native command, so each
// is a Lua script: one per call, and one per (namespace, group) of a
// batch. (A Complete by a plain SET would write done over the live lease
// of a consumer that claimed the key after the caller's lease ran out,
// and over the record of a key whose token never held it, which
// [dedupe.Store] forbids.)
//
// Before Redis 7.0, which lacks PEXPIRETIME (a record's end by the
// server's clock, which [dedupe.ClaimResult.Until] reports), claims are a
// script too. The store tells which it has by INFO server on its first
// claim (on a cluster or ring, from every master: the lowest version
// decides); if INFO fails, that claim fails saying so, and the next asks
// again. A server downgraded below 7.0 under a running store answers its
// claims that find a record with an unknown-command error until the
// process restarts.
//
// Scripts are sent by EVALSHA, and once more by EVAL when Redis has lost
// them (a restart or SCRIPT FLUSH). A batch that spans groups is split into
// one script per group, all sent in one pipeline: one round trip on a
// single server, one per node (in parallel) on a cluster.
//
// go-redis sends a command again when its connection drops before the
// answer arrives (Options.MaxRetries, 3 by default), so a claim or script
// may run twice. Every call is safe to run twice: a claim's token is drawn
// once per call, and a claim that finds its own record answers Acquired
// with that token rather than in flight to its own caller, which would
// block the key for a whole lease; a Complete run again succeeds. Only a
// Release run again answers [dedupe.ErrLeaseLost], its record being gone
// already. A claim that fails after all gives back what it may have taken,
// so its keys are free at once.
type Store struct {
	client redis.UniversalClient
	prefix string
	// head caches the start of the keys of the (namespace, group) last
	// used, which a store mostly serves alone: a key then costs one
	// allocation instead of encoding its hash tag again.
	head atomic.Pointer[keyHead]
	// claims is how the store claims: claimsUnknown until a claim has
	// asked the server for its version.
	claims atomic.Int32
	// lease and retention are the last of each boxed for a command.
	lease, retention atomic.Pointer[boxedMillis]
	// pipes are pipelines of client, whose Exec empties them, for reuse:
	// making one takes two allocations.
	pipes sync.Pool
}

// pipelined sends cmds in one pipeline; each holds its answer.
func (s *Store) pipelined(ctx context.Context, cmds []redis.Cmder) {
	pipe, _ := s.pipes.Get().(redis.Pipeliner)
	if pipe == nil {
		pipe = s.client.Pipeline()
	}
	_ = pipe.BatchProcess(ctx, cmds...)
	// Exec's error is the first command's; the caller reads each.
	_, _ = pipe.Exec(ctx)
	s.pipes.Put(pipe)
}

// boxedMillis is a duration's milliseconds as a command's argument: a
// consumer's lease and retention do not change, and boxing each for every
// call would cost an allocation.
type boxedMillis struct {
	d time.Duration
	v any
}

// box returns d's milliseconds as an argument, from last if it holds d.
func box(last *atomic.Pointer[boxedMillis], d time.Duration) any {
	if b := last.Load(); b != nil && b.d == d {
		return b.v
	}
	b := &boxedMillis{d: d, v: millis(d)}
	last.Store(b)
	return b.v
}

// keyHead is the start of the keys of one (namespace, group).
type keyHead struct {
	ns, group, head string
}

var _ dedupe.Store = (*Store)(nil)

// checkRef reports whether ref can be stored.
func checkRef(ref dedupe.Ref) error {
	return dedupekit.CheckRef(ref.Namespace, ref.Group, ref.Key)
}

// New returns a Store that keeps its records through client, which the
// caller owns: the Store never closes it. It does not reach the server: the
// first claim asks for its version.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisdedupe: nil client")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{client: client, prefix: cfg.Prefix}, nil
}

// key returns the Redis key that holds r's record.
func (s *Store) key(r dedupe.Ref) string {
	h := s.head.Load()
	if h == nil || h.ns != r.Namespace || h.group != r.Group {
		h = &keyHead{ns: r.Namespace, group: r.Group, head: s.prefix + rediskey.HashTag(r.Namespace, r.Group) + ":"}
		s.head.Store(h)
	}
	return h.head + r.Key
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if lease <= 0 {
		if err := checkRef(t.Ref); err != nil {
			return fmt.Errorf("redisdedupe: extend %q: %w", t.Ref, err)
		}
		return fmt.Errorf("redisdedupe: extend %q: lease %v must be positive", t.Ref, lease)
	}
	return s.ownedOne(ctx, "extend", extendScript, extendHash, t, nil, box(&s.lease, lease))
}

// ownedOne runs script, whose hash is sha and which answers {1} if t's
// token owns its record and {0} if not, over t's key with the arguments
// before (if not nil), t's token and after (if not nil). It builds the
// EVALSHA itself, which saves half the allocations of script.Run on the
// path of every message. op names the call in errors.
func (s *Store) ownedOne(ctx context.Context, op string, script *redis.Script, sha any, t dedupe.Ticket, before, after any) error {
	err := checkRef(t.Ref)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		cmd := s.ownedCmd(ctx, new(ownedArgs), sha, t, before, after)
		_ = s.client.Process(ctx, cmd)
		err = owns(s.again(ctx, script, cmd))
	}
	if err != nil {
		return fmt.Errorf("redisdedupe: %s %q: %w", op, t.Ref, err)
	}
	return nil
}

// ownedCmd is the EVALSHA of ownedOne, its arguments in a.
func (s *Store) ownedCmd(ctx context.Context, a *ownedArgs, sha any, t dedupe.Ticket, before, after any) *redis.Cmd {
	a.token = t.Token
	a.args[0], a.args[1], a.args[2], a.args[3] = "evalsha", sha, 1, s.key(t.Ref)
	n := 4
	for _, arg := range [...]any{before, &a.token, after} {
		if arg != nil {
			a.args[n] = arg
			n++
		}
	}
	return redis.NewCmd(ctx, a.args[:n]...)
}

// again runs script once more, by EVAL, when cmd, its EVALSHA, failed for
// want of it in Redis's script cache (a restart or SCRIPT FLUSH): the
// script never ran, so running it again is safe. It returns cmd
// otherwise.
func (s *Store) again(ctx context.Context, script *redis.Script, cmd *redis.Cmd) *redis.Cmd {
	if !noScript(cmd) {
		return cmd
	}
	args := cmd.Args() // evalsha, sha, numkeys, keys…, args…
	n := int(args[2].(int))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = args[3+i].(string)
	}
	return script.Run(ctx, s.client, keys, args[3+n:]...)
}

// ownedArgs are the arguments of an EVALSHA of one key, in one allocation
// with the token they point to (go-redis writes a *string as the string):
// boxing the token as a string would take one more.
type ownedArgs struct {
	args  [6]any
	token string
}

// owns reads the answer of an owned script for one key.
func owns(cmd *redis.Cmd) error {
	v, err := cmd.Result()
	if err != nil {
		return err
	}
	switch n, _ := v.([]any); {
	case len(n) != 1:
		return fmt.Errorf("script answered %v for 1 key", v)
	case n[0] != int64(1):
		return dedupe.ErrLeaseLost
	}
	return nil
}

// Complete implements [dedupe.Store]. One ticket, a consumer's commonest
// call, takes one EVALSHA built without a batch's slices.
func (s *Store) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	if retention <= 0 {
		return nil, fmt.Errorf("redisdedupe: complete batch of %d: retention %v must be positive", len(ts), retention)
	}
	if len(ts) == 1 {
		return perItem(s.ownedOne(ctx, "complete", completeScript, completeHash, traced(ts[0]), box(&s.retention, retention), nil))
	}
	errs, err := s.owned(ctx, "complete", completeScript, tracedAll(ts), millis(retention))
	if err != nil {
		return nil, fmt.Errorf("redisdedupe: complete batch of %d: %w", len(ts), err)
	}
	return errs, nil
}

// traced is t with its trace, if the store keeps it, after its token: the
// argument of completeScript.
func traced(t dedupe.Ticket) dedupe.Ticket {
	if tr := dedupekit.KeptTrace(t.Trace); tr != "" {
		t.Token += string(traceSep) + tr
	}
	return t
}

// tracedAll is ts traced, a copy only if a ticket has a trace.
func tracedAll(ts []dedupe.Ticket) []dedupe.Ticket {
	for i, t := range ts {
		if t.Trace != "" {
			out := slices.Clone(ts)
			for j := i; j < len(out); j++ {
				out[j] = traced(out[j])
			}
			return out
		}
	}
	return ts
}

// Release implements [dedupe.Store], one ticket as Complete does.
func (s *Store) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	if len(ts) == 1 {
		return perItem(s.ownedOne(ctx, "release", releaseScript, releaseHash, ts[0], nil, nil))
	}
	errs, err := s.owned(ctx, "release", releaseScript, ts)
	if err != nil {
		return nil, fmt.Errorf("redisdedupe: release batch of %d: %w", len(ts), err)
	}
	return errs, nil
}

// perItem is the answer of a call of one ticket whose error is err: the
// ticket's own if it is a sentinel, else the call's.
func perItem(err error) ([]error, error) {
	if err != nil && !errors.Is(err, dedupe.ErrLeaseLost) && !errors.Is(err, msgkey.ErrInvalid) {
		return nil, err
	}
	return []error{err}, nil
}

// owned runs script, which answers 1 or 0 per ticket, over ts with head
// before the tokens in each part's arguments. op names the call in errors.
func (s *Store) owned(ctx context.Context, op string, script *redis.Script, ts []dedupe.Ticket, head ...any) ([]error, error) {
	errs := make([]error, len(ts))
	valid := make([]int, 0, len(ts))
	for i, t := range ts {
		if err := checkRef(t.Ref); err != nil {
			errs[i] = fmt.Errorf("redisdedupe: %s %q: %w", op, t.Ref, err)
			continue
		}
		valid = append(valid, i)
	}
	parts := split(valid, func(i int) dedupe.Ref { return ts[i].Ref })
	for _, p := range parts {
		p.args = append(p.args, head...)
		for _, i := range p.idx {
			p.keys = append(p.keys, s.key(ts[i].Ref))
			p.args = append(p.args, ts[i].Token)
		}
	}
	out, err := s.run(ctx, script, parts)
	if err != nil {
		return nil, err
	}
	for pi, p := range parts {
		if len(out[pi]) != len(p.idx) {
			return nil, fmt.Errorf("script answered %d values for %d keys", len(out[pi]), len(p.idx))
		}
		for j, i := range p.idx {
			if out[pi][j] != int64(1) {
				errs[i] = fmt.Errorf("redisdedupe: %s %q: %w", op, ts[i].Ref, dedupe.ErrLeaseLost)
			}
		}
	}
	return errs, nil
}

// part is the share of a batch whose keys share one hash tag, and so one
// cluster slot: its namespace and group, the items' indexes, their keys
// and the script's arguments.
type part struct {
	ns, group string
	idx       []int
	keys      []string
	args      []any
}

// split groups the items idx by their refs' (namespace, group), in order.
// A batch rarely spans more than a few groups, so a linear search is
// fastest.
func split(idx []int, ref func(int) dedupe.Ref) []*part {
	var parts []*part
	for _, i := range idx {
		r := ref(i)
		var p *part
		for _, q := range parts {
			if q.ns == r.Namespace && q.group == r.Group {
				p = q
				break
			}
		}
		if p == nil {
			p = &part{ns: r.Namespace, group: r.Group}
			parts = append(parts, p)
		}
		p.idx = append(p.idx, i)
	}
	return parts
}

// run runs script once per part in one round trip and returns each part's
// answer: integers (int64), and strings from the claim script.
func (s *Store) run(ctx context.Context, script *redis.Script, parts []*part) ([][]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]any, len(parts))
	switch len(parts) {
	case 0:
		return out, nil
	case 1:
		vals, err := script.Run(ctx, s.client, parts[0].keys, parts[0].args...).Slice()
		out[0] = vals
		return out, err
	}
	cmds := make([]*redis.Cmd, len(parts))
	pipe := s.client.Pipeline()
	for i, p := range parts {
		cmds[i] = script.EvalSha(ctx, pipe, p.keys, p.args...)
	}
	// Exec's error is the first command's; each is checked below.
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if noScript(cmd) {
			// Redis lost its script cache (a restart or SCRIPT FLUSH):
			// this part never ran, so running it again is safe.
			cmd = script.Run(ctx, s.client, parts[i].keys, parts[i].args...)
		}
		vals, err := cmd.Slice()
		if err != nil {
			return nil, err
		}
		out[i] = vals
	}
	return out, nil
}

// noScript reports whether an EVALSHA failed because Redis does not hold
// the script. It looks at the error only if there is one: the look costs
// an allocation.
func noScript(cmd *redis.Cmd) bool {
	err := cmd.Err()
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// millis rounds d up to whole milliseconds, Redis's resolution.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
