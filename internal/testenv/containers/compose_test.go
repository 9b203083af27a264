package containers_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/testcontainers/testcontainers-go"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// composeUpTimeout bounds waiting for every service to be healthy: a hang
// guard, not a guess at a loaded machine's speed (four JVMs start).
const composeUpTimeout = 10 * time.Minute

// composePorts are the host ports docker/compose.yaml publishes.
var composePorts = []int{6379, 3306, 5432, 9876, 10909, 10911, 10912, 9877, 20909, 20911, 20912, 8081}

// composeBrokers maps each name server docker/compose.yaml publishes to the
// broker address it must list (broker.conf, broker5.conf).
var composeBrokers = map[string]string{"127.0.0.1:9876": "127.0.0.1:10911", "127.0.0.1:9877": "127.0.0.1:20911"}

// TestCompose brings docker/compose.yaml up with both RocketMQ generations,
// waits until every service's healthcheck passes, checks that each name
// server then accepts connections (a healthcheck that passes early would let
// the demo meet a refused connection) and waits until it lists its broker,
// runs the example sender and receiver against it (examples/demo.sh) on each
// name server, checks that every message was applied once, and tears the
// stack down.
//
// It runs the compose command named by IDEMQ_COMPOSE (default
// docker-compose, which speaks to DOCKER_HOST): "docker compose" works as
// well. COMPOSE_PROJECT_NAME names the project, default idemq-test.
func TestCompose(t *testing.T) {
	cli, _ := engine(t)
	compose := strings.Fields(os.Getenv("IDEMQ_COMPOSE"))
	if len(compose) == 0 {
		compose = []string{"docker-compose"}
	}
	if _, err := exec.LookPath(compose[0]); err != nil {
		testenv.Missing(t, fmt.Sprintf("%s: %v", compose[0], err))
	}
	// Compose lower-cases the name it labels containers with.
	project := strings.ToLower(cmp.Or(os.Getenv("COMPOSE_PROJECT_NAME"), "idemq-test"))
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range composePorts {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			t.Fatalf("port %d, which docker/compose.yaml publishes, is taken: %v", p, err)
		}
		l.Close()
	}
	run := func(ctx context.Context, args ...string) error {
		args = append(append(compose[1:], "-p", project, "-f", filepath.Join(repo, "docker", "compose.yaml"),
			"--profile", "rocketmq5"), args...)
		out, err := exec.CommandContext(ctx, compose[0], args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", compose[0], strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(t.Context(), "config", "-q"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run(context.Background(), "down", "-v", "--remove-orphans"); err != nil {
			t.Error(err)
		}
	})
	if err := run(t.Context(), "up", "-d"); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, cli, project)
	for _, ns := range slices.Sorted(maps.Keys(composeBrokers)) {
		// Healthy means listening: a refused connection here is a
		// healthcheck that passes without its server, as podman made of
		// ["CMD", "bash", "-c", "echo > …"] by splitting it at spaces.
		conn, err := net.Dial("tcp", ns)
		if err != nil {
			t.Fatalf("name server healthy, yet: %v", err)
		}
		conn.Close()
		// A broker listens a moment before it registers.
		broker := composeBrokers[ns]
		testkit.WaitFor(t, ns+" to list "+broker, func() bool {
			masters, err := testenv.RocketMQMasters(t.Context(), ns)
			return err == nil && slices.Contains(masters, broker)
		})
	}

	// The services answer as docs/docker.md's IDEMQ_* values say.
	for _, c := range []struct{ driver, dsn string }{
		{"mysql", "root@tcp(127.0.0.1:3306)/idemq?parseTime=true"},
		{"pgx", "postgres://postgres@127.0.0.1:5432/idemq?sslmode=disable"},
	} {
		db, err := sql.Open(c.driver, c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PingContext(t.Context()); err != nil {
			t.Errorf("%s: %v", c.dsn, err)
		}
		db.Close()
	}
	for _, ns := range slices.Sorted(maps.Keys(composeBrokers)) {
		t.Run("demo on "+ns, func(t *testing.T) { demo(t, repo, ns) })
	}
}

// waitHealthy waits until every container of project reports healthy.
func waitHealthy(t *testing.T, cli *testcontainers.DockerClient, project string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), composeUpTimeout)
	defer cancel()
	for {
		list, err := cli.ContainerList(ctx, container.ListOptions{
			All: true, Filters: filters.NewArgs(filters.Arg("label", "com.docker.compose.project="+project)),
		})
		if err != nil {
			t.Fatal(err)
		}
		var waiting []string
		for _, c := range list {
			info, err := cli.ContainerInspect(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Health == nil || info.State.Health.Status != "healthy" {
				status := info.State.Status
				if info.State.Health != nil {
					status += ", " + info.State.Health.Status
				}
				waiting = append(waiting, fmt.Sprintf("%s (%s)", strings.TrimPrefix(info.Name, "/"), status))
			}
		}
		if len(list) > 0 && len(waiting) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			// podman schedules healthchecks with systemd timers: without
			// systemd, something must call `podman healthcheck run`, as
			// scripts/test-containers.sh does.
			t.Fatalf("%d containers, not healthy: %s", len(list), strings.Join(waiting, ", "))
		case <-time.After(time.Second):
		}
	}
}

var summaryRE = regexp.MustCompile(`summary: sent=(\d+) resent=(\d+) delivered=(\d+) suppressed=(\d+) applied=(\d+)`)

// demo runs examples/demo.sh against the stack's Redis and the name server
// ns and checks that applied == sent.
func demo(t *testing.T, repo, ns string) {
	cmd := exec.CommandContext(t.Context(), filepath.Join(repo, "examples", "demo.sh"), "100", "25")
	cmd.Env = append(os.Environ(), "IDEMQ_REDIS_ADDR=127.0.0.1:6379", "IDEMQ_ROCKETMQ_NAMESRV="+ns)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	m := summaryRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("demo.sh printed no summary:\n%s", out)
	}
	t.Log(m[0])
	if m[1] != "100" || m[5] != m[1] {
		t.Errorf("sent=%s applied=%s, want both 100", m[1], m[5])
	}
}
