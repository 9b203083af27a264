package grpcrmqlog_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	_ "github.com/idemq/idemq/rmqlog/grpcrmqlog"
)

// childEnv makes the test binary start a client instead of running tests:
// "start" as it is, "reset" after the client's ResetLogger.
const childEnv = "GRPCRMQLOG_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child starts a producer against os.Args[1]'s dead endpoint, with
// slog.Default writing every level as JSON to standard error, so that
// only this package's routing decides what appears there.
func child(mode string) int {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if mode == "reset" {
		golang.ResetLogger()
	}
	p, err := golang.NewProducer(&golang.Config{
		Endpoint:    os.Getenv("GRPCRMQLOG_TEST_ENDPOINT"),
		Credentials: &credentials.SessionCredentials{},
	}, golang.WithTopics("nowhere"))
	if err != nil {
		return 2
	}
	if p.Start() == nil {
		return 3 // nobody listens there
	}
	return 0
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
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+tt.mode, "GRPCRMQLOG_TEST_ENDPOINT="+dead, "HOME="+home,
				"rocketmq.client.logLevel="+tt.level)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
			}
			if stdout.Len() > 0 {
				t.Errorf("the client wrote to standard output: %s", stdout.Bytes())
			}
			info := false
			for line := range strings.Lines(stderr.String()) {
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
				t.Errorf("the client's start on slog: %v, want %v\n%s", info, tt.wantInfo, stderr.Bytes())
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
