package redisdedupe

// UseScripts makes s claim with the Lua script, as on a Redis before 7.0,
// so that the tests cover both paths on one server.
func UseScripts(s *Store) { s.claims.Store(claimsScript) }

// MajorVersion exports majorVersion.
var MajorVersion = majorVersion
