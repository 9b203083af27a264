package outbox

import (
	"context"
	"time"
)

// SetClaimHook sets a hook that runs inside each claim on MySQL and
// PostgreSQL, under the claim lock, between the choice and the lease; nil
// clears it. Set it before a relay starts.
func SetClaimHook(f func()) { claimHook = f }

// Cleanup is the cleanup a relay runs, for the tests that run it alone.
func (o *Outbox) Cleanup(ctx context.Context, retention time.Duration) (int64, error) {
	return o.cleanup(ctx, retention)
}
