package redisdedupe

import "github.com/idemq/idemq/dedupe"

// UseScripts makes s claim with the Lua script, as on a Redis before 7.0,
// so that the tests cover both paths on one server.
func UseScripts(s *Store) { s.claims.Store(claimsScript) }

// MajorVersion exports majorVersion.
var MajorVersion = majorVersion

// Key returns the Redis key of r's record.
func Key(s *Store, r dedupe.Ref) string { return s.key(r) }
