package redisdedupe

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	res, errs, err := s.claim(ctx, reqs, lease, nil)
	if err != nil {
		if len(reqs) == 1 {
			return nil, nil, fmt.Errorf("redisdedupe: claim %q: %w", reqs[0].Ref, err)
		}
		return nil, nil, fmt.Errorf("redisdedupe: claim batch of %d: %w", len(reqs), err)
	}
	return res, errs, nil
}

// item is one claim of a batch: its index in the batch, its key and the
// record it writes.
type item struct {
	i        int
	key, rec string
}

// token is the owner token in the item's record.
func (it item) token() string { return it.rec[1 : 1+tokenLen] }

// claim claims reqs. On the native path, the commands of ride, if any, go
// first in the pipeline of its SETs (alone if no item is valid); the
// caller reads their answers.
func (s *Store) claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration, ride []redis.Cmder) ([]dedupe.ClaimResult, []error, error) {
	if lease <= 0 {
		return nil, nil, fmt.Errorf("lease %v must be positive", lease)
	}
	res, errs := answers(len(reqs))
	items := make([]item, 0, len(reqs))
	for i, r := range reqs {
		if err := dedupekit.CheckClaim(r.Namespace, r.Group, r.Key, lease, r.Fingerprint); err != nil {
			errs[i] = fmt.Errorf("redisdedupe: claim %q: %w", r.Ref, err)
			continue
		}
		items = append(items, item{i: i, key: s.key(r.Ref), rec: newRecord(r.Fingerprint)})
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		if len(ride) > 0 {
			s.pipelined(ctx, ride)
		}
		return res, errs, nil
	}
	native, err := s.native(ctx)
	if err != nil {
		return nil, nil, err
	}
	if native {
		err = s.claimNative(ctx, reqs, lease, items, res, ride)
	} else {
		err = s.claimByScript(ctx, reqs, lease, items, res)
	}
	if err != nil {
		s.giveBack(ctx, reqs, items)
		return nil, nil, err
	}
	return res, errs, nil
}

// answersOfOne are the answers of a claim of one item, in one
// allocation: a consumer's commonest call.
type answersOfOne struct {
	res  [1]dedupe.ClaimResult
	errs [1]error
}

// answers returns the slices of a claim's n results and errors.
func answers(n int) ([]dedupe.ClaimResult, []error) {
	if n == 1 {
		a := new(answersOfOne)
		return a.res[:], a.errs[:]
	}
	return make([]dedupe.ClaimResult, n), make([]error, n)
}

// claimNative claims items with one pipeline of SET NX, after the
// commands of ride, then reads the records that the SETs found, if any, in
// a second.
func (s *Store) claimNative(ctx context.Context, reqs []dedupe.Item, lease time.Duration, items []item, res []dedupe.ClaimResult, ride []redis.Cmder) error {
	all := make([]redis.Cmder, len(ride), len(ride)+len(items))
	copy(all, ride)
	for _, it := range items {
		all = append(all, setNX(ctx, it.key, it.rec, box(&s.lease, lease)))
	}
	sets := all[len(ride):]
	if len(all) == 1 {
		// A consumer's commonest call: a plain command costs less than a
		// pipeline.
		_ = s.client.Process(ctx, all[0])
	} else {
		s.pipelined(ctx, all)
	}
	var found []item
	for j, it := range items {
		switch set, err := sets[j].(*redis.BoolCmd).Result(); {
		case err != nil:
			return err
		case set:
			res[it.i] = dedupe.ClaimResult{Outcome: dedupe.Acquired, Token: it.token()}
		default:
			found = append(found, it)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return s.claimFound(ctx, reqs, lease, found, res)
}

// setNX is SET key rec NX PX leaseMillis: it writes rec where key holds no
// record, and answers true if it did. Not SET NX GET: see [Store].
func setNX(ctx context.Context, key, rec string, leaseMillis any) *redis.BoolCmd {
	a := &setArgs{rec: rec}
	a.args = [...]any{"set", key, &a.rec, "nx", "px", leaseMillis}
	return redis.NewBoolCmd(ctx, a.args[:]...)
}

// setArgs are the arguments of a SET NX, in one allocation with the
// record they point to (go-redis writes a *string as the string): boxing
// the record as a string would take one more. The key stays a string,
// which go-redis reads to route a command on a cluster.
type setArgs struct {
	args [6]any
	rec  string
}

// claimFound answers the items whose SET found a record, with one
// pipeline per batch of GET, PTTL, PEXPIRETIME and GET again per key. A
// record is never written twice with one value (each holds a token drawn
// once), so if both GETs find the same record, it stood from one to the
// other and the times read are its own. A key whose record changed in
// between, or is gone (completed, released or ran out since the SET), is
// claimed again by the claim script, which reads a record and its TTL at
// one instant.
func (s *Store) claimFound(ctx context.Context, reqs []dedupe.Item, lease time.Duration, items []item, res []dedupe.ClaimResult) error {
	type reads struct {
		value, again *redis.StringCmd
		ttl, expires *redis.IntCmd
	}
	rs := make([]reads, len(items))
	pipe := s.client.Pipeline()
	for j, it := range items {
		rs[j] = reads{
			value:   redis.NewStringCmd(ctx, "get", it.key),
			ttl:     redis.NewIntCmd(ctx, "pttl", it.key),
			expires: redis.NewIntCmd(ctx, "pexpiretime", it.key),
			again:   redis.NewStringCmd(ctx, "get", it.key),
		}
		_ = pipe.BatchProcess(ctx, rs[j].value, rs[j].ttl, rs[j].expires, rs[j].again)
	}
	_, _ = pipe.Exec(ctx)
	var changed []item
	for j, it := range items {
		v, errV := rs[j].value.Result()
		again, errA := rs[j].again.Result()
		for _, err := range []error{errV, errA, rs[j].ttl.Err(), rs[j].expires.Err()} {
			if err != nil && err != redis.Nil {
				return err
			}
		}
		if errV != nil || errA != nil || v != again {
			changed = append(changed, it)
			continue
		}
		ttl, expires := rs[j].ttl.Val(), rs[j].expires.Val()
		st, timed, trace := decide(it.rec, reqs[it.i].Fingerprint, v)
		switch {
		case !timed:
			res[it.i] = answer(st, it)
		case ttl > 0 && expires > 0:
			res[it.i] = dedupe.ClaimResult{Outcome: st, Until: time.UnixMilli(expires), Remaining: time.Duration(ttl) * time.Millisecond, Trace: trace}
		default:
			changed = append(changed, it) // about to run out
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return s.claimByScript(ctx, reqs, lease, changed, res)
}

// decide answers a claim that tried to write rec, with fingerprint fp, and
// found old: its own record, written by an earlier send of the same
// command (go-redis sends a command again when an answer is lost, and the
// token is fresh per claim, so no other claim wrote it); a fingerprint
// that conflicts, as [dedupekit.FingerprintsConflict] says; or a live record
// done or in flight, whose answer needs its time left (timed), with, for a
// done one, the trace its completion kept.
func decide(rec, fp, old string) (st dedupe.Outcome, timed bool, trace string) {
	if old == rec {
		return dedupe.Acquired, false, ""
	}
	had, trace := fields(old)
	if dedupekit.FingerprintsConflict(had, fp) {
		return dedupe.Reused, false, ""
	}
	if strings.HasPrefix(old, "d") {
		return dedupe.Suppressed, true, trace
	}
	return dedupe.Busy, true, ""
}

// fields returns the fingerprint and the trace of the record v.
func fields(v string) (fp, trace string) {
	if len(v) <= 1+tokenLen {
		return "", ""
	}
	fp = v[1+tokenLen:]
	if i := strings.IndexByte(fp, traceSep); i >= 0 {
		return fp[:i], fp[i+1:]
	}
	return fp, ""
}

// answer is the result of an untimed decision for it.
func answer(st dedupe.Outcome, it item) dedupe.ClaimResult {
	if st == dedupe.Acquired {
		return dedupe.ClaimResult{Outcome: st, Token: it.token()}
	}
	return dedupe.ClaimResult{Outcome: st}
}

// claimByScript claims items with claimScript, one per (namespace, group).
func (s *Store) claimByScript(ctx context.Context, reqs []dedupe.Item, lease time.Duration, items []item, res []dedupe.ClaimResult) error {
	idx := make([]int, len(items))
	for j := range items {
		idx[j] = j
	}
	parts := split(idx, func(j int) dedupe.Ref { return reqs[items[j].i].Ref })
	for _, p := range parts {
		for _, j := range p.idx {
			p.keys = append(p.keys, items[j].key)
			p.args = append(p.args, items[j].rec, millis(lease))
		}
	}
	out, err := s.run(ctx, claimScript, parts)
	if err != nil {
		return err
	}
	for pi, p := range parts {
		vals := out[pi]
		if len(vals) < 2+2*len(p.idx) {
			return fmt.Errorf("script answered %d values for %d keys", len(vals), len(p.idx))
		}
		sec, _ := vals[0].(int64)
		usec, _ := vals[1].(int64)
		now := time.UnixMicro(sec*1e6 + usec)
		traces := vals[2+2*len(p.idx):] // of the keys answered done, in order
		for n, j := range p.idx {
			it := items[j]
			code, _ := vals[2+2*n].(int64)
			ms, _ := vals[3+2*n].(int64)
			var trace string
			if code == codeDone {
				if len(traces) == 0 {
					return fmt.Errorf("script answered %d values for %d keys, too few traces", len(vals), len(p.idx))
				}
				trace, _ = traces[0].(string)
				traces = traces[1:]
			}
			left := time.Duration(max(ms, 1)) * time.Millisecond
			switch code {
			case codeAcquired:
				res[it.i] = dedupe.ClaimResult{Outcome: dedupe.Acquired, Token: it.token()}
			case codeDone:
				res[it.i] = dedupe.ClaimResult{Outcome: dedupe.Suppressed, Until: now.Add(left), Remaining: left, Trace: trace}
			case codeInFlight:
				res[it.i] = dedupe.ClaimResult{Outcome: dedupe.Busy, Until: now.Add(left), Remaining: left}
			case codeConflict:
				res[it.i] = dedupe.ClaimResult{Outcome: dedupe.Reused}
			default:
				return fmt.Errorf("script answered code %v", vals[2+2*n])
			}
		}
		if len(traces) > 0 {
			return fmt.Errorf("script answered %d values for %d keys, too many traces", len(vals), len(p.idx))
		}
	}
	return nil
}

// giveBack releases, as far as Redis lets it, what a failed claim may have
// acquired: its commands may have run before the failure (a lost answer,
// or one part of a pipeline failing), and their tokens never reach the
// caller. Release deletes a record only if it holds the token, so
// releasing a claim that never happened is harmless.
func (s *Store) giveBack(ctx context.Context, reqs []dedupe.Item, items []item) {
	ts := make([]dedupe.Ticket, len(items))
	for j, it := range items {
		ts[j] = dedupe.Ticket{Ref: reqs[it.i].Ref, Token: it.token()}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupekit.GiveBackTimeout)
	defer cancel()
	_, _ = s.owned(ctx, "release", releaseScript, ts)
}

// tokenChars are the characters of a token, as [rand.Text] draws them.
const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// newRecord returns a processing record with fingerprint fp and a fresh
// token of tokenLen characters (130 random bits), built in one allocation.
func newRecord(fp string) string {
	var src [tokenLen]byte
	_, _ = rand.Read(src[:]) // never fails
	var b strings.Builder
	b.Grow(1 + tokenLen + len(fp))
	b.WriteByte('p')
	for _, c := range src {
		b.WriteByte(tokenChars[c%32])
	}
	b.WriteString(fp)
	return b.String()
}
