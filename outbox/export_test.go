package outbox

// SetClaimHook sets a hook that runs inside each claim on MySQL and
// PostgreSQL, under the claim lock, between the choice and the lease; nil
// clears it. Set it before a relay starts.
func SetClaimHook(f func()) { claimHook = f }
