package grpcv5_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/internal/racechild"
)

// startClient starts a producer against the dead endpoint of its settings,
// with slog.Default writing every level as JSON to standard error, so that
// only this package's routing decides what appears there.
func startClient(reset bool) error {
	var endpoint string
	if err := racechild.Settings(&endpoint); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if reset {
		golang.ResetLogger()
	}
	p, err := golang.NewProducer(&golang.Config{
		Endpoint:    endpoint,
		Credentials: &credentials.SessionCredentials{},
	}, golang.WithTopics("nowhere"))
	if err != nil {
		return err
	}
	if p.Start() == nil {
		return errors.New("the producer started: something listens at " + endpoint)
	}
	return nil
}

// TestTheClientLogsToSlog starts real clients in child processes, each with
// its own $HOME, against an endpoint nobody listens on: the client's info
// records reach slog only when asked for, and no log file is written
// unless the client's own logger is put back.
func TestTheClientLogsToSlog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	tests := []struct {
		name     string
		mode     string
		level    string // rocketmq.client.logLevel
		wantInfo bool   // the client's info records on slog
		wantFile bool   // $HOME/logs/rocketmq/rocketmq_client_go.log
	}{
		{name: "default", mode: "start"},
		{name: "client level variable", mode: "start", level: "info", wantInfo: true},
		{name: "ResetLogger undoes it", mode: "reset", level: "info", wantFile: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			p := racechild.Start(t, tt.mode, "client", dead, "HOME="+home, "rocketmq.client.logLevel="+tt.level)
			said := p.Wait(t, time.Minute, nil)
			if t.Failed() {
				t.FailNow()
			}
			if len(said) > 0 {
				t.Errorf("the client wrote to standard output: %q", said)
			}
			stderr := p.Stderr()
			info := false
			for line := range strings.Lines(stderr) {
				var rec struct{ Level, Msg, Source string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not a slog record: %q", line)
				}
				if rec.Source != "rocketmq-clients/golang/v5" {
					t.Errorf("record without the client as its source: %q", line)
				}
				if rec.Level == "INFO" && rec.Msg == "begin to start the rocketmq client" {
					info = true
				} else if rec.Level == "DEBUG" || (rec.Level == "INFO" && !tt.wantInfo) {
					t.Errorf("record below the level: %q", line)
				}
			}
			if info != tt.wantInfo {
				t.Errorf("the client's start on slog: %v, want %v\n%s", info, tt.wantInfo, stderr)
			}
			logs, err := os.ReadFile(filepath.Join(home, "logs", "rocketmq", "rocketmq_client_go.log"))
			if tt.wantFile != (err == nil) {
				t.Errorf("log file read: %v, want it written %v", err, tt.wantFile)
			}
			if tt.wantFile && !bytes.Contains(logs, []byte("begin to start the rocketmq client")) {
				t.Errorf("the client's own log file lacks its start:\n%s", logs)
			}
			if !tt.wantFile {
				if _, err := os.Stat(filepath.Join(home, "logs")); !os.IsNotExist(err) {
					t.Errorf("$HOME/logs: %v, want none", err)
				}
			}
		})
	}
}
