package redisdedupe

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
)

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	res, err := s.claimOne(ctx, req)
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("redisdedupe: claim %q: %w", req.Ref, err)
	}
	return res, nil
}

// claimOne is Claim without the batch's slices, which would double the
// allocations of a consumer's commonest call.
func (s *Store) claimOne(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if req.Lease <= 0 {
		return dedupe.ClaimResult{}, fmt.Errorf("lease %v must be positive", req.Lease)
	}
	if err := req.Validate(); err != nil {
		return dedupe.ClaimResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return dedupe.ClaimResult{}, err
	}
	native, err := s.native(ctx)
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	it := item{key: s.Key(req.Ref), rec: newRecord(req.Fingerprint)}
	if !native {
		return s.claimSlow(ctx, req, it, s.claimByScript)
	}
	cmd := setNX(ctx, it.key, it.rec, req.Lease)
	_ = s.client.Process(ctx, cmd)
	old, err := cmd.Result()
	switch {
	case err == redis.Nil:
		return dedupe.ClaimResult{Status: dedupe.Acquired, Token: it.token()}, nil
	case err != nil:
		s.giveBack(ctx, []dedupe.ClaimRequest{req}, []item{it})
		return dedupe.ClaimResult{}, err
	}
	st, timed := decide(it.rec, req.Fingerprint, old)
	if !timed {
		return answer(st, it), nil
	}
	it.old, it.status = old, st
	return s.claimSlow(ctx, req, it, s.timeLeft)
}

// claimSlow answers the claim it of req with step, a stage of a batch's
// claim, as a batch of one.
func (s *Store) claimSlow(ctx context.Context, req dedupe.ClaimRequest, it item,
	step func(context.Context, []dedupe.ClaimRequest, []item, []dedupe.ClaimResult) error) (dedupe.ClaimResult, error) {
	reqs, items, res := []dedupe.ClaimRequest{req}, []item{it}, make([]dedupe.ClaimResult, 1)
	if err := step(ctx, reqs, items, res); err != nil {
		s.giveBack(ctx, reqs, items)
		return dedupe.ClaimResult{}, err
	}
	return res[0], nil
}

// ClaimBatch implements [dedupe.Batcher].
func (s *Store) ClaimBatch(ctx context.Context, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error, error) {
	res, errs, err := s.claim(ctx, reqs)
	if err != nil {
		return nil, nil, fmt.Errorf("redisdedupe: claim batch of %d: %w", len(reqs), err)
	}
	return res, errs, nil
}

// item is one claim of a batch: its index in the batch, its key and the
// record it writes; and, once its SET found a live record of another
// owner, that record and the answer it makes.
type item struct {
	i        int
	key, rec string
	old      string
	status   dedupe.Status
}

// token is the owner token in the item's record.
func (it item) token() string { return it.rec[1 : 1+tokenLen] }

func (s *Store) claim(ctx context.Context, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error, error) {
	for _, r := range reqs {
		if r.Lease <= 0 {
			return nil, nil, fmt.Errorf("%q: lease %v must be positive", r.Ref, r.Lease)
		}
	}
	errs := make([]error, len(reqs))
	items := make([]item, 0, len(reqs))
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			errs[i] = fmt.Errorf("redisdedupe: claim %q: %w", r.Ref, err)
			continue
		}
		items = append(items, item{i: i, key: s.Key(r.Ref), rec: newRecord(r.Fingerprint)})
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	res := make([]dedupe.ClaimResult, len(reqs))
	if len(items) == 0 {
		return res, errs, nil
	}
	native, err := s.native(ctx)
	if err != nil {
		return nil, nil, err
	}
	if native {
		err = s.claimNative(ctx, reqs, items, res)
	} else {
		err = s.claimByScript(ctx, reqs, items, res)
	}
	if err != nil {
		s.giveBack(ctx, reqs, items)
		return nil, nil, err
	}
	return res, errs, nil
}

// claimNative claims items with one pipeline of SET NX GET, then asks the
// time left of the live records found, if any, in a second.
func (s *Store) claimNative(ctx context.Context, reqs []dedupe.ClaimRequest, items []item, res []dedupe.ClaimResult) error {
	cmds := make([]*redis.StringCmd, len(items))
	pipe := s.client.Pipeline()
	for j, it := range items {
		cmds[j] = setNX(ctx, it.key, it.rec, reqs[it.i].Lease)
		_ = pipe.Process(ctx, cmds[j])
	}
	_, _ = pipe.Exec(ctx)
	var timed []item
	for j, it := range items {
		old, err := cmds[j].Result()
		switch {
		case err == redis.Nil:
			res[it.i] = dedupe.ClaimResult{Status: dedupe.Acquired, Token: it.token()}
			continue
		case err != nil:
			return err
		}
		st, t := decide(it.rec, reqs[it.i].Fingerprint, old)
		if !t {
			res[it.i] = answer(st, it)
			continue
		}
		it.old, it.status = old, st
		timed = append(timed, it)
	}
	if len(timed) == 0 {
		return nil
	}
	return s.timeLeft(ctx, reqs, timed, res)
}

// setNX is SET key rec NX PX lease GET: it writes rec where key holds no
// record and answers what it held (redis.Nil: nothing).
func setNX(ctx context.Context, key, rec string, lease time.Duration) *redis.StringCmd {
	return redis.NewStringCmd(ctx, "set", key, rec, "nx", "px", millis(lease), "get")
}

// decide answers a claim that tried to write rec, with fingerprint fp, and
// found old: its own record, written by an earlier send of the same
// command (go-redis sends a command again when an answer is lost, and the
// token is fresh per claim, so no other claim wrote it); a fingerprint
// that conflicts, as [dedupe.FingerprintsConflict] says; or a live record
// done or in flight, whose answer needs its time left (timed).
func decide(rec, fp, old string) (st dedupe.Status, timed bool) {
	if old == rec {
		return dedupe.Acquired, false
	}
	var had string
	if len(old) > 1+tokenLen {
		had = old[1+tokenLen:]
	}
	if dedupe.FingerprintsConflict(had, fp) {
		return dedupe.Conflict, false
	}
	if strings.HasPrefix(old, "d") {
		return dedupe.Done, true
	}
	return dedupe.InFlight, true
}

// answer is the result of an untimed decision for it.
func answer(st dedupe.Status, it item) dedupe.ClaimResult {
	if st == dedupe.Acquired {
		return dedupe.ClaimResult{Status: st, Token: it.token()}
	}
	return dedupe.ClaimResult{Status: st}
}

// timeLeft answers the items whose SET found a live record done or in
// flight, with that record's time left: one pipeline of PTTL, PEXPIRETIME
// and GET per key. The GET checks that the times read are the found
// record's: a record is never written twice with one value (each holds a
// token drawn once), so if the GET still finds it, it stood from the SET
// to the GET. A key whose record changed in between (it was completed,
// released or ran out) is claimed again by the claim script, which reads a
// record and its TTL at one instant.
func (s *Store) timeLeft(ctx context.Context, reqs []dedupe.ClaimRequest, items []item, res []dedupe.ClaimResult) error {
	type reads struct {
		ttl, expires *redis.IntCmd
		value        *redis.StringCmd
	}
	rs := make([]reads, len(items))
	pipe := s.client.Pipeline()
	for j, it := range items {
		rs[j] = reads{
			ttl:     redis.NewIntCmd(ctx, "pttl", it.key),
			expires: redis.NewIntCmd(ctx, "pexpiretime", it.key),
			value:   redis.NewStringCmd(ctx, "get", it.key),
		}
		_ = pipe.BatchProcess(ctx, rs[j].ttl, rs[j].expires, rs[j].value)
	}
	_, _ = pipe.Exec(ctx)
	var again []item
	for j, it := range items {
		ttl, err := rs[j].ttl.Result()
		if err != nil {
			return err
		}
		expires, err := rs[j].expires.Result()
		if err != nil {
			return err
		}
		v, err := rs[j].value.Result()
		if err != nil && err != redis.Nil {
			return err
		}
		if err == redis.Nil || v != it.old || ttl <= 0 || expires <= 0 {
			again = append(again, it)
			continue
		}
		left := time.Duration(ttl) * time.Millisecond
		res[it.i] = dedupe.ClaimResult{Status: it.status, Until: time.UnixMilli(expires), Remaining: left}
	}
	if len(again) == 0 {
		return nil
	}
	return s.claimByScript(ctx, reqs, again, res)
}

// claimByScript claims items with claimScript, one per (namespace, group).
func (s *Store) claimByScript(ctx context.Context, reqs []dedupe.ClaimRequest, items []item, res []dedupe.ClaimResult) error {
	idx := make([]int, len(items))
	for j := range items {
		idx[j] = j
	}
	parts := split(idx, func(j int) dedupe.Ref { return reqs[items[j].i].Ref })
	for _, p := range parts {
		for _, j := range p.idx {
			p.keys = append(p.keys, items[j].key)
			p.args = append(p.args, items[j].rec, millis(reqs[items[j].i].Lease))
		}
	}
	out, err := s.run(ctx, claimScript, parts)
	if err != nil {
		return err
	}
	for pi, p := range parts {
		vals := out[pi]
		if len(vals) != 2+2*len(p.idx) {
			return fmt.Errorf("script answered %d values for %d keys", len(vals), len(p.idx))
		}
		now := time.UnixMicro(vals[0]*1e6 + vals[1])
		for n, j := range p.idx {
			it := items[j]
			code, ms := vals[2+2*n], vals[3+2*n]
			left := time.Duration(max(ms, 1)) * time.Millisecond
			switch code {
			case codeAcquired:
				res[it.i] = dedupe.ClaimResult{Status: dedupe.Acquired, Token: it.token()}
			case codeDone:
				res[it.i] = dedupe.ClaimResult{Status: dedupe.Done, Until: now.Add(left), Remaining: left}
			case codeInFlight:
				res[it.i] = dedupe.ClaimResult{Status: dedupe.InFlight, Until: now.Add(left), Remaining: left}
			case codeConflict:
				res[it.i] = dedupe.ClaimResult{Status: dedupe.Conflict}
			default:
				return fmt.Errorf("script answered code %d", code)
			}
		}
	}
	return nil
}

// giveBack releases, as far as Redis lets it, what a failed claim may have
// acquired: its commands may have run before the failure (a lost answer,
// or one part of a pipeline failing), and their tokens never reach the
// caller. Release deletes a record only if it holds the token, so
// releasing a claim that never happened is harmless.
func (s *Store) giveBack(ctx context.Context, reqs []dedupe.ClaimRequest, items []item) {
	ts := make([]dedupe.Ticket, len(items))
	for j, it := range items {
		ts[j] = dedupe.Ticket{Ref: reqs[it.i].Ref, Token: it.token()}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupe.GiveBackTimeout)
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
