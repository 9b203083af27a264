package idgen_test

import "time"

// t0 is a tick boundary of every layout the tests use, well inside their
// lives.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
