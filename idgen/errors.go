package idgen

import "errors"

// Errors returned by the package. They are wrapped with details; test with
// errors.Is.
var (
	// ErrInvalidConfig reports settings that cannot work: a malformed
	// Layout, one with fewer than ten years left (unless
	// Config.AllowShortLife) or whose time field has run out, a node id
	// the layout cannot hold (or a pool of them), a host name without a
	// StatefulSet ordinal, a high-water file another generator holds,
	// a rollback policy or lease settings that New or NewLeased rejects.
	// The other idgen packages wrap it too. The error says which.
	ErrInvalidConfig = errors.New("idgen: invalid config")
	// ErrClockBackwards reports that the clock stands behind the time of
	// the last ID issued (or reserved by an earlier run) and the rollback
	// policy refused to issue more until it catches up, or that it stepped
	// back before the layout's epoch.
	ErrClockBackwards = errors.New("idgen: clock moved backwards")
	// ErrClosed reports a call on a closed Generator (or cached
	// Generator, or segment Allocator).
	ErrClosed = errors.New("idgen: closed")
	// ErrSyntax reports text that is not a decimal ID.
	ErrSyntax = errors.New("idgen: invalid ID syntax")
	// ErrRange reports a value outside the range of an ID or field, or of
	// a scrambler's width.
	ErrRange = errors.New("idgen: value out of range")
)
