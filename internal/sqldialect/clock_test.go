package sqldialect_test

import (
	"os"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// TestClock runs the clock's pieces on each real database: After is Now
// plus the microseconds it is given, within one statement; UnixMicros
// gives microseconds since the Unix epoch; Never is before now; Greatest
// is the larger.
func TestClock(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			s := sqldialect.Of(b.Dialect)
			const later = int64(72 * time.Hour / time.Microsecond)
			var now, after, never, greatest int64
			err := db.QueryRowContext(t.Context(), s.Rebind(`SELECT `+s.UnixMicros(s.Now())+`, `+s.UnixMicros(s.After("?"))+`,
	CASE WHEN `+s.Never()+` < `+s.Now()+` THEN 1 ELSE 0 END, `+s.Greatest("3", "7")), later).Scan(&now, &after, &never, &greatest)
			if err != nil {
				t.Fatal(err)
			}
			if after-now != later {
				t.Errorf("After(%d µs) - Now = %d µs", later, after-now)
			}
			// A wrong unit or epoch would be off by years, not by a
			// clock's skew.
			if d := time.Since(time.UnixMicro(now)).Abs(); d > 24*time.Hour {
				t.Errorf("UnixMicros(Now) = %v, %v from this host's clock", time.UnixMicro(now).UTC(), d)
			}
			if never != 1 {
				t.Error("Never is not before Now")
			}
			if greatest != 7 {
				t.Errorf("Greatest(3, 7) = %d", greatest)
			}
		})
	}
}
