package idgen

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of worker-id leasing. Leasers wrap them; test with errors.Is.
var (
	// ErrLeaseLost reports a renewal or release whose lease has ended by
	// the leaser's clock, or whose node another holder has taken since.
	// A leased Generator returns it too while it cannot prove that its
	// lease is live (its last successful renewal plus the lease, less the
	// safety margin, lies behind the local monotonic clock); it issues
	// again once a renewal succeeds or a new lease is taken.
	ErrLeaseLost = errors.New("idgen: worker lease lost")
	// ErrNoFreeNode reports that no node id can be granted now: the pool's
	// ids are all held by live leases, the one requested is held, or the
	// pool is recovering from lost records (a Redis restart without
	// persistence, a failover), when nothing is granted until one whole
	// lease has passed, so that every holder of a lost lease has stopped
	// issuing IDs first. The error says which.
	ErrNoFreeNode = errors.New("idgen: no free node id in the pool")
)

// A Leaser grants node ids for a time measured by its store's clock, so that
// generators on many hosts never issue IDs with the same node id at once.
// Redis ([github.com/idemq/idemq/idgen/redisidgen]) and SQL
// ([github.com/idemq/idemq/idgen/sqlidgen]) implement it; use one through
// [NewLeased]. Implementations are safe for concurrent use by many
// goroutines and processes.
//
// The pool is the node ids 0 to the leaser's size minus one. A node id is
// held by at most one live lease. A free node goes to the caller that waited
// longest for it: never-used ids first, then released and expired ones in
// the order they became free (a queue with retired ids at its tail), so that
// a freed node rests as long as the pool allows.
//
// Every lease record keeps the node's high-water mark: the end of the last
// time unit in which any holder may have issued IDs with the node; the next
// holder issues only IDs after it. A holder raises it on every renewal to
// the end of the window in which it may issue IDs before the next one, so
// that it covers a holder that is killed; on release it sets it to the end
// of what it really issued (never below the mark it was granted, which it
// started after), so that the next holder after a clean stop need not wait
// out the window. Every call honours
// ctx; an error other than the sentinels means the store could not be
// reached and the outcome is unknown (a retry of the same call is safe).
type Leaser interface {
	// Acquire takes a node id for a lease. With req.Static it takes
	// exactly req.Node, failing with ErrNoFreeNode if another live lease
	// holds it; otherwise it takes the free node that waited longest,
	// failing with ErrNoFreeNode when none is free or the pool recovers
	// from lost records. It fails with ErrInvalidConfig when the pool holds
	// node ids above req.MaxNode.
	Acquire(ctx context.Context, req LeaseRequest) (Lease, error)
	// Renew extends l by the lease length from the store's now, and
	// raises the node's high-water mark to highWater if it is below. It
	// fails with ErrLeaseLost if l has ended or is not the node's current
	// lease, and then changes nothing.
	Renew(ctx context.Context, l Lease, highWater time.Time) (Lease, error)
	// Release ends l at once, sets the node's high-water mark to
	// highWater — the holder's exact mark, which may lie below what its
	// renewals reserved but never below l.HighWater as granted; the zero
	// Time leaves the mark as it is — and puts the node at the tail of the
	// free queue. It fails with ErrLeaseLost if l has ended or is not the
	// node's current lease, and then changes nothing.
	Release(ctx context.Context, l Lease, highWater time.Time) error
}

// LeaseRequest asks a Leaser for a node id.
type LeaseRequest struct {
	// MaxNode is the largest node id the caller's layout holds
	// (Layout.MaxNode): a pool with larger ids is refused.
	MaxNode int64
	// Static asks for Node itself instead of any free node: a node id set
	// by configuration is registered, so that a second process configured
	// with the same node fails at start.
	Static bool
	Node   int64
	// Owner describes the holder for operators (host name, process id);
	// it is not used for any decision.
	Owner string
}

// Lease is a node id held until the store's clock passes its end.
type Lease struct {
	Node int64
	// Token identifies this holding of Node: renewals and the release
	// must carry it.
	Token string
	// TTL is the length of the lease from the store's now at the moment
	// it was granted or last renewed: the lease ends no earlier than TTL
	// after the call that returned it was made. Zero means the node is
	// never granted to anyone else (uid-generator's row per start), so it
	// needs no renewal.
	TTL time.Duration
	// HighWater is the node's high-water mark when the lease was granted
	// or renewed: every ID issued with the node by earlier holders lies
	// before it. Zero if the node was never used.
	HighWater time.Time
}

// validate checks a lease a Leaser returned against the layout.
func (l Lease) validate(layout Layout) error {
	if err := layout.checkNode(l.Node); err != nil {
		return fmt.Errorf("idgen: leaser granted node %d: %w", l.Node, err)
	}
	if l.TTL < 0 {
		return fmt.Errorf("%w: leaser granted node %d for a negative TTL %v", ErrInvalidConfig, l.Node, l.TTL)
	}
	return nil
}
