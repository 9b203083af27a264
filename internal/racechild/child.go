package racechild

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// roleEnv names the role a child started by [Start] runs; settingsEnv
// carries its settings, as JSON.
const (
	roleEnv     = "IDEMQ_RACECHILD_ROLE"
	settingsEnv = "IDEMQ_RACECHILD_SETTINGS"
)

// Main runs the role this process was started in by [Start], one of roles,
// and exits: 0 if it returned nil, 1 with its error on standard error if
// not. In a process that runs tests it returns at once. Call it first in
// TestMain, before anything a child should not do:
//
//	func TestMain(m *testing.M) {
//		racechild.Main(map[string]func() error{"holder": hold})
//		os.Exit(testenv.Run(m))
//	}
func Main(roles map[string]func() error) {
	role, ok := os.LookupEnv(roleEnv)
	if !ok {
		return
	}
	run := roles[role]
	if run == nil {
		fmt.Fprintf(os.Stderr, "racechild: no role %q in this test binary\n", role)
		os.Exit(1)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// After a data race, the race runtime turns this into [ExitRace].
	os.Exit(0)
}

// Settings decodes into v the settings the parent started this child with.
func Settings(v any) error {
	if err := json.Unmarshal([]byte(os.Getenv(settingsEnv)), v); err != nil {
		return fmt.Errorf("racechild: the child's settings: %w", err)
	}
	return nil
}

var sayMu sync.Mutex

// Say tells the parent one line, which it reads with [Proc.Next].
func Say(format string, args ...any) {
	sayMu.Lock()
	defer sayMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

var (
	toldOnce sync.Once
	told     chan string
)

// Told returns the lines the parent tells this child ([Proc.Tell]). It is
// closed when the parent closes the child's standard input ([Proc.Stop]),
// or dies.
func Told() <-chan string {
	toldOnce.Do(func() {
		told = make(chan string, 16)
		go func() {
			for s := bufio.NewScanner(os.Stdin); s.Scan(); {
				told <- s.Text()
			}
			close(told)
		}()
	})
	return told
}

// Stopped returns a channel closed once the parent asks this child to stop
// ([Proc.Stop]) or dies. The lines it tells the child meanwhile are
// dropped: a role reads [Told] or waits for Stopped.
func Stopped() <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for range Told() {
		}
		close(c)
	}()
	return c
}
