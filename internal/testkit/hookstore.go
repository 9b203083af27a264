package testkit

import (
	"context"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// StoreHooks are a test's hooks on a [HookStore]'s calls. Each runs before
// its call, with the call's context and arguments: it may note the call,
// hold it (block until the test lets it go or ctx ends), or fail it by
// returning an error, which the call returns without reaching the store. A
// nil hook lets its call through.
type StoreHooks struct {
	Claim    func(ctx context.Context, items []dedupe.Item) error
	Complete func(ctx context.Context, ts []dedupe.Ticket) error
	Release  func(ctx context.Context, ts []dedupe.Ticket) error
	Extend   func(ctx context.Context, t dedupe.Ticket) error
}

// HookStore wraps a store and runs a test's [StoreHooks] before its Claim,
// Complete, Release and Extend, so that a test can fail or hold chosen
// calls of a real store. Its other methods are the wrapped store's. (To fail
// the nth call of a kind, use FaultStore.)
type HookStore struct {
	dedupe.Store
	Hooks StoreHooks
}

var _ dedupe.Store = (*HookStore)(nil)

// Claim runs the Claim hook, then the wrapped store's Claim.
func (s *HookStore) Claim(ctx context.Context, items []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	if h := s.Hooks.Claim; h != nil {
		if err := h(ctx, items); err != nil {
			return nil, nil, err
		}
	}
	return s.Store.Claim(ctx, items, lease)
}

// Complete runs the Complete hook, then the wrapped store's Complete.
func (s *HookStore) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	if h := s.Hooks.Complete; h != nil {
		if err := h(ctx, ts); err != nil {
			return nil, err
		}
	}
	return s.Store.Complete(ctx, ts, retention)
}

// Release runs the Release hook, then the wrapped store's Release.
func (s *HookStore) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	if h := s.Hooks.Release; h != nil {
		if err := h(ctx, ts); err != nil {
			return nil, err
		}
	}
	return s.Store.Release(ctx, ts)
}

// Extend runs the Extend hook, then the wrapped store's Extend.
func (s *HookStore) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if h := s.Hooks.Extend; h != nil {
		if err := h(ctx, t); err != nil {
			return err
		}
	}
	return s.Store.Extend(ctx, t, lease)
}
