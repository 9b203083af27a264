package segment_test

import (
	"io"
	"log/slog"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is a time the tests' clocks start at.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
