package consumer

import (
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// TestDecisionTableCoversEveryOutcome checks the table's shape: a row for
// every outcome and for nothing else, each with an action and a counter of
// its own, and every logged row with a fix. TestOutcomes checks
// what the rows say.
func TestDecisionTableCoversEveryOutcome(t *testing.T) {
	var s counters
	counters := map[*atomic.Int64]dedupe.Outcome{}
	outcomes := map[dedupe.Outcome]bool{}
	for o := dedupe.Completed; o <= dedupe.Canceled; o++ { // every outcome of a Guard
		outcomes[o] = true
		if int(o) >= len(decisions) {
			t.Errorf("%v: no row", o)
			continue
		}
		d := decisions[o]
		switch d.act {
		case adapter.Ack, adapter.Retry, adapter.Hold:
		default:
			t.Errorf("%v: action %d", o, d.act)
		}
		if d.count == nil {
			t.Errorf("%v: no counter", o)
			continue
		}
		p := d.count(&s)
		if other, ok := counters[p]; ok {
			t.Errorf("%v and %v share a counter", o, other)
		}
		counters[p] = o
		if (d.msg == "") != (d.fix == "") {
			t.Errorf("%v: logged %q with fix %q; a logged row needs both", o, d.msg, d.fix)
		}
	}
	for o := range decisions {
		if d := decisions[o]; (d.act != 0 || d.count != nil) && !outcomes[dedupe.Outcome(o)] {
			t.Errorf("row %d is no outcome of a Guard", o)
		}
	}
}
