package idgen

import "errors"

// Errors returned by the package. They are wrapped with details; test with
// errors.Is.
var (
	// ErrExhausted reports a layout whose time field has run out: the
	// clock is past its end of life.
	ErrExhausted = errors.New("idgen: layout exhausted")
	// ErrNodeRange reports a node, datacenter or worker id the layout
	// cannot hold.
	ErrNodeRange = errors.New("idgen: node id out of range")
	// ErrNoNode reports a node id source that had none to give: an unset
	// environment variable, a host name without an ordinal.
	ErrNoNode = errors.New("idgen: no node id")
	// ErrInvalidConfig reports settings that cannot work: a Layout that
	// Validate rejects, one with fewer than ten years left (unless
	// Config.AllowShortLife), a rollback policy or lease settings that New
	// or NewLeased rejects.
	ErrInvalidConfig = errors.New("idgen: invalid config")
	// ErrClockBackwards reports that the clock stands behind the time of
	// the last ID issued (or reserved by an earlier run) and the rollback
	// policy refused to issue more until it catches up, or that it stepped
	// back before the layout's epoch.
	ErrClockBackwards = errors.New("idgen: clock moved backwards")
	// ErrStoreLocked reports a high-water store that another generator
	// holds, in this process or another: two generators sharing a mark
	// would each trust a mark the other overwrites.
	ErrStoreLocked = errors.New("idgen: high-water store in use by another generator")
	// ErrClosed reports a call on a closed Generator.
	ErrClosed = errors.New("idgen: generator closed")
	// ErrSyntax reports text that is not an encoded ID.
	ErrSyntax = errors.New("idgen: invalid ID syntax")
	// ErrRange reports a value outside the range of an ID or field.
	ErrRange = errors.New("idgen: value out of range")
)
