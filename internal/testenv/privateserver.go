package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// privateServer is what PrivateRedis and PrivatePostgres share: a server
// process of a test's own, in a directory of its own, on a port that stays
// the same across restarts, and how to launch it there again.
type privateServer struct {
	name   string // "private redis", for errors
	dir    string
	port   int
	launch func(ctx context.Context) (*process, error)

	mu sync.Mutex
	p  *process // nil while down
}

// begin launches the server the first time; on failure it removes the
// directory.
func (s *privateServer) begin(ctx context.Context) error {
	if err := s.start(ctx); err != nil {
		os.RemoveAll(s.dir)
		return err
	}
	return nil
}

// restart stops the server and launches it again.
func (s *privateServer) restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return fmt.Errorf("%s: restart after stop", s.name)
	}
	err := s.p.stop()
	s.p = nil
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return s.launchLocked(ctx, "restart")
}

// kill kills the server with SIGKILL and leaves it down until start.
func (s *privateServer) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return fmt.Errorf("%s: kill: not running", s.name)
	}
	s.p.signal = syscall.SIGKILL
	err := s.p.stop()
	s.p = nil
	if err != nil {
		return fmt.Errorf("%s: kill: %w", s.name, err)
	}
	return nil
}

// start launches the server while it is down.
func (s *privateServer) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		return fmt.Errorf("%s: start: already running", s.name)
	}
	return s.launchLocked(ctx, "start")
}

func (s *privateServer) launchLocked(ctx context.Context, what string) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	p, err := s.launch(ctx)
	if err != nil {
		return fmt.Errorf("%s: %s on port %d: %w", s.name, what, s.port, err)
	}
	s.p = p
	return nil
}

// Stop stops the server and removes its directory. It is safe to call
// more than once.
func (s *privateServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.p != nil {
		err = s.p.stop()
		s.p = nil
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}
