package idgen

import "time"

// Test hooks into the layout's unexported figures.
var (
	ValidateLayout = Layout.validate
	TotalBits      = Layout.totalBits
	EndOfLife      = func(l Layout) time.Time { return l.endOfLife() }
)
