package sqlidgen

// Test hooks into the settings the constructors filled in.
var (
	LeaserConfig     = func(l *Leaser) Config { return l.cfg }
	SegmentsTable    = func(s *Segments) string { return s.table }
	WorkerNodesTable = func(w *WorkerNodes) string { return w.table }
	WorkerNodesHost  = func(w *WorkerNodes) string { return w.host }
	MaxSize          = int64(maxSize)
	DefaultLease     = defaultLease
)
