package redisdedupe

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/rediskey"
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

// Validate reports settings that cannot work.
func (c Config) Validate() error {
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
// and the payload fingerprint. Tokens are compared inside the scripts: a
// consumer whose lease ran out can neither complete, release nor extend a
// claim that someone else holds.
//
// The scripts are sent by EVALSHA, and once more by EVAL when Redis has lost
// them (a restart or SCRIPT FLUSH). A batch that spans groups is split into
// one script per group, all sent in one pipeline: one round trip on a single
// server, one per node (in parallel) on a cluster.
//
// go-redis sends a command again when its connection drops before the
// answer arrives (Options.MaxRetries, 3 by default), so a script may run
// twice. Every call is safe to run twice: a claim's token is drawn once per
// call, and a claim that finds its own record answers Acquired with that
// token rather than in flight to its own caller, which would block the key
// for a whole lease; a Complete run again succeeds. Only a Release run again
// answers [dedupe.ErrLeaseLost], its record being gone already. A claim
// that fails after all gives back what it may have taken, so its keys are
// free at once.
type Store struct {
	client redis.UniversalClient
	prefix string
}

var (
	_ dedupe.Store   = (*Store)(nil)
	_ dedupe.Batcher = (*Store)(nil)
)

// New returns a Store that keeps its records through client, which the
// caller owns: the Store never closes it.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisdedupe: nil client")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{client: client, prefix: cfg.Prefix}, nil
}

// Key returns the Redis key that holds r's record, for operators and tools
// that inspect the store.
func (s *Store) Key(r dedupe.Ref) string {
	return s.prefix + rediskey.HashTag(r.Namespace, r.Group) + ":" + r.Key
}

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	res, errs, err := s.claim(ctx, []dedupe.ClaimRequest{req})
	switch {
	case err != nil:
		return dedupe.ClaimResult{}, fmt.Errorf("redisdedupe: claim %q: %w", req.Ref, err)
	case errs[0] != nil:
		return dedupe.ClaimResult{}, errs[0]
	}
	return res[0], nil
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, t dedupe.Ticket, retention time.Duration) error {
	errs, err := s.complete(ctx, []dedupe.Ticket{t}, retention)
	return single("complete", t.Ref, errs, err)
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, t dedupe.Ticket) error {
	errs, err := s.owned(ctx, "release", releaseScript, []dedupe.Ticket{t})
	return single("release", t.Ref, errs, err)
}

// single turns a batch of one's answer into a single call's.
func single(op string, r dedupe.Ref, errs []error, err error) error {
	if err != nil {
		return fmt.Errorf("redisdedupe: %s %q: %w", op, r, err)
	}
	return errs[0]
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	err := t.Ref.Validate()
	if err == nil && lease <= 0 {
		err = fmt.Errorf("lease %v must be positive", lease)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		var n int64
		n, err = extendScript.Run(ctx, s.client, []string{s.Key(t.Ref)}, t.Token, millis(lease)).Int64()
		if err == nil && n == 0 {
			err = dedupe.ErrLeaseLost
		}
	}
	if err != nil {
		return fmt.Errorf("redisdedupe: extend %q: %w", t.Ref, err)
	}
	return nil
}

// ClaimBatch implements [dedupe.Batcher].
func (s *Store) ClaimBatch(ctx context.Context, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error, error) {
	res, errs, err := s.claim(ctx, reqs)
	if err != nil {
		return nil, nil, fmt.Errorf("redisdedupe: claim batch of %d: %w", len(reqs), err)
	}
	return res, errs, nil
}

func (s *Store) claim(ctx context.Context, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error, error) {
	for _, r := range reqs {
		if r.Lease <= 0 {
			return nil, nil, fmt.Errorf("%q: lease %v must be positive", r.Ref, r.Lease)
		}
	}
	errs := make([]error, len(reqs))
	parts := split("claim", len(reqs), func(i int) dedupe.Ref { return reqs[i].Ref }, errs, func(i int) error { return reqs[i].Validate() })
	for _, p := range parts {
		for _, i := range p.idx {
			p.keys = append(p.keys, s.Key(reqs[i].Ref))
			p.args = append(p.args, "p"+rand.Text()+reqs[i].Fingerprint, millis(reqs[i].Lease))
		}
	}
	out, err := s.run(ctx, claimScript, parts)
	if err != nil {
		s.giveBack(ctx, reqs, parts)
		return nil, nil, err
	}
	res := make([]dedupe.ClaimResult, len(reqs))
	for pi, p := range parts {
		vals := out[pi]
		if len(vals) != 2+2*len(p.idx) {
			return nil, nil, fmt.Errorf("script answered %d values for %d keys", len(vals), len(p.idx))
		}
		now := time.UnixMicro(vals[0]*1e6 + vals[1])
		for j, i := range p.idx {
			code, ms := vals[2+2*j], vals[3+2*j]
			left := time.Duration(max(ms, 1)) * time.Millisecond
			switch code {
			case codeAcquired:
				res[i] = dedupe.ClaimResult{Status: dedupe.Acquired, Token: p.args[2*j].(string)[1 : 1+tokenLen]}
			case codeDone:
				res[i] = dedupe.ClaimResult{Status: dedupe.Done, Until: now.Add(left), Remaining: left}
			case codeInFlight:
				res[i] = dedupe.ClaimResult{Status: dedupe.InFlight, Until: now.Add(left), Remaining: left}
			case codeConflict:
				res[i] = dedupe.ClaimResult{Status: dedupe.Conflict}
			default:
				return nil, nil, fmt.Errorf("script answered code %d", code)
			}
		}
	}
	return res, errs, nil
}

// giveBack releases, as far as Redis lets it, what a failed claim may have
// acquired: its scripts may have run before the failure (a lost answer, or
// one part of a pipeline failing), and their tokens never reach the caller. Release
// deletes a record only if it holds the token, so releasing a claim that
// never happened is harmless.
func (s *Store) giveBack(ctx context.Context, reqs []dedupe.ClaimRequest, parts []*part) {
	var ts []dedupe.Ticket
	for _, p := range parts {
		for j, i := range p.idx {
			ts = append(ts, dedupe.Ticket{Ref: reqs[i].Ref, Token: p.args[2*j].(string)[1 : 1+tokenLen]})
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupe.GiveBackTimeout)
	defer cancel()
	_, _ = s.owned(ctx, "release", releaseScript, ts)
}

// CompleteBatch implements [dedupe.Batcher].
func (s *Store) CompleteBatch(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	errs, err := s.complete(ctx, ts, retention)
	if err != nil {
		return nil, fmt.Errorf("redisdedupe: complete batch of %d: %w", len(ts), err)
	}
	return errs, nil
}

func (s *Store) complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	if retention <= 0 {
		return nil, fmt.Errorf("retention %v must be positive", retention)
	}
	return s.owned(ctx, "complete", completeScript, ts, millis(retention))
}

// ReleaseBatch implements [dedupe.Batcher].
func (s *Store) ReleaseBatch(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	errs, err := s.owned(ctx, "release", releaseScript, ts)
	if err != nil {
		return nil, fmt.Errorf("redisdedupe: release batch of %d: %w", len(ts), err)
	}
	return errs, nil
}

// owned runs script, which answers 1 or 0 per ticket, over ts with head
// before the tokens in each part's arguments. op names the call in errors.
func (s *Store) owned(ctx context.Context, op string, script *redis.Script, ts []dedupe.Ticket, head ...any) ([]error, error) {
	errs := make([]error, len(ts))
	parts := split(op, len(ts), func(i int) dedupe.Ref { return ts[i].Ref }, errs, func(i int) error { return ts[i].Ref.Validate() })
	for _, p := range parts {
		p.args = append(p.args, head...)
		for _, i := range p.idx {
			p.keys = append(p.keys, s.Key(ts[i].Ref))
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
			if out[pi][j] != 1 {
				errs[i] = fmt.Errorf("redisdedupe: %s %q: %w", op, ts[i].Ref, dedupe.ErrLeaseLost)
			}
		}
	}
	return errs, nil
}

// part is the share of a batch whose keys share one hash tag, and so one
// cluster slot: its namespace and group, the items' indexes in the batch,
// their keys and the script's arguments.
type part struct {
	ns, group string
	idx       []int
	keys      []string
	args      []any
}

// split checks the batch's n items with valid, recording failures of op in
// errs, and groups the valid ones by (namespace, group) in batch order. A
// batch rarely spans more than a few groups, so a linear search is fastest.
func split(op string, n int, ref func(int) dedupe.Ref, errs []error, valid func(int) error) []*part {
	var parts []*part
	for i := range n {
		if err := valid(i); err != nil {
			errs[i] = fmt.Errorf("redisdedupe: %s %q: %w", op, ref(i), err)
			continue
		}
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
// answer.
func (s *Store) run(ctx context.Context, script *redis.Script, parts []*part) ([][]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]int64, len(parts))
	switch len(parts) {
	case 0:
		return out, nil
	case 1:
		vals, err := script.Run(ctx, s.client, parts[0].keys, parts[0].args...).Int64Slice()
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
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			// Redis lost its script cache (a restart or SCRIPT FLUSH):
			// this part never ran, so running it again is safe.
			cmd = script.Run(ctx, s.client, parts[i].keys, parts[i].args...)
		}
		vals, err := cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		out[i] = vals
	}
	return out, nil
}

// millis rounds d up to whole milliseconds, Redis's resolution.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
