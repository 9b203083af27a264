package testkit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// TripCounter counts the claim and completion round trips made through a
// store that sends completions with claims: completions that ride with a
// claim count in the claim's.
type TripCounter struct {
	dedupe.CompleteClaimer
	n atomic.Int64
}

// Trips returns the round trips counted so far.
func (s *TripCounter) Trips() int64 { return s.n.Load() }

func (s *TripCounter) Claim(ctx context.Context, items []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	s.n.Add(1)
	return s.CompleteClaimer.Claim(ctx, items, lease)
}

func (s *TripCounter) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	s.n.Add(1)
	return s.CompleteClaimer.Complete(ctx, ts, retention)
}

func (s *TripCounter) CompleteClaim(ctx context.Context, ts []dedupe.Ticket, retention time.Duration, items []dedupe.Item, lease time.Duration) ([]error, error, []dedupe.ClaimResult, []error, error) {
	s.n.Add(1)
	return s.CompleteClaimer.CompleteClaim(ctx, ts, retention, items, lease)
}
