package redisdedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
)

var _ dedupe.CompleteClaimer = (*Store)(nil)

// CompleteClaim implements [dedupe.CompleteClaimer]. On Redis 7 or later,
// the completions' scripts go first in the pipeline of the claim's SET NX
// commands: one round trip on a single server. Before 7.0 it is Complete,
// then Claim.
func (s *Store) CompleteClaim(ctx context.Context, ts []dedupe.Ticket, retention time.Duration, reqs []dedupe.Item, lease time.Duration) (done []error, doneErr error, res []dedupe.ClaimResult, errs []error, err error) {
	native := false
	if retention > 0 && len(ts) > 0 && ctx.Err() == nil {
		native, _ = s.native(ctx)
	}
	if !native {
		// Claim reports a version it cannot tell, and both a done
		// context.
		done, doneErr = s.Complete(ctx, ts, retention)
		res, errs, err = s.Claim(ctx, reqs, lease)
		return done, doneErr, res, errs, err
	}
	c := s.completion(ctx, ts, retention)
	res, errs, err = s.claim(ctx, reqs, lease, c.cmds)
	if err != nil {
		err = fmt.Errorf("redisdedupe: claim batch of %d, after completions: %w", len(reqs), err)
	}
	done, doneErr = c.answers(ctx, s)
	if doneErr != nil {
		doneErr = fmt.Errorf("redisdedupe: complete batch of %d, with a claim: %w", len(ts), doneErr)
	}
	return done, doneErr, res, errs, err
}

// completion is a Complete sent in another call's pipeline: its commands,
// one per (namespace, group), each over the tickets idx[i] says.
type completion struct {
	ts   []dedupe.Ticket
	errs []error
	cmds []redis.Cmder
	idx  [][]int
	// Those of a completion of one ticket, a consumer's commonest, in the
	// same allocation.
	oneErr  [1]error
	oneCmd  [1]redis.Cmder
	oneIdx  [1][]int
	oneArgs ownedArgs
}

// first is the index of a completion of one ticket: nobody writes to it.
var first = []int{0}

// completion prepares the completion of ts for retention.
func (s *Store) completion(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) *completion {
	c := &completion{ts: ts}
	if len(ts) == 1 {
		c.errs = c.oneErr[:]
		if err := checkRef(ts[0].Ref); err != nil {
			c.errs[0] = fmt.Errorf("redisdedupe: complete %q: %w", ts[0].Ref, err)
			return c
		}
		c.oneCmd[0] = s.ownedCmd(ctx, &c.oneArgs, completeHash, traced(ts[0]), box(&s.retention, retention), nil)
		c.oneIdx[0] = first
		c.cmds, c.idx = c.oneCmd[:], c.oneIdx[:]
		return c
	}
	c.errs = make([]error, len(ts))
	valid := make([]int, 0, len(ts))
	for i, t := range ts {
		if err := checkRef(t.Ref); err != nil {
			c.errs[i] = fmt.Errorf("redisdedupe: complete %q: %w", t.Ref, err)
			continue
		}
		valid = append(valid, i)
	}
	for _, p := range split(valid, func(i int) dedupe.Ref { return ts[i].Ref }) {
		args := make([]any, 0, 4+2*len(p.idx))
		args = append(args, "evalsha", completeHash, len(p.idx))
		for _, i := range p.idx {
			args = append(args, s.key(ts[i].Ref))
		}
		args = append(args, millis(retention))
		for _, i := range p.idx {
			args = append(args, traced(ts[i]).Token)
		}
		c.cmds = append(c.cmds, redis.NewCmd(ctx, args...))
		c.idx = append(c.idx, p.idx)
	}
	return c
}

// answers reads the answers of c's commands, once sent.
func (c *completion) answers(ctx context.Context, s *Store) ([]error, error) {
	for k, cmder := range c.cmds {
		cmd := s.again(ctx, completeScript, cmder.(*redis.Cmd))
		vals, err := cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(vals) != len(c.idx[k]) {
			return nil, fmt.Errorf("script answered %d values for %d keys", len(vals), len(c.idx[k]))
		}
		for j, i := range c.idx[k] {
			if vals[j] != 1 {
				c.errs[i] = fmt.Errorf("redisdedupe: complete %q: %w", c.ts[i].Ref, dedupe.ErrLeaseLost)
			}
		}
	}
	return c.errs, nil
}
