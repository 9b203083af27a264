package memdedupe

// Records returns how many records s holds, live or expired but not yet
// swept, for the benchmarks in package memdedupe_test.
func Records(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
