package containers_test

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/containers"
)

// engine skips t (fails it under CI=true) without a container engine, and
// returns a client of it and the session label the harness puts on its
// containers.
func engine(t *testing.T) (*testcontainers.DockerClient, string) {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(t.Context())
	if err == nil {
		_, err = cli.Ping(t.Context())
	}
	if err != nil {
		testenv.Missing(t, "no container engine (set DOCKER_HOST): "+err.Error())
	}
	t.Cleanup(func() { cli.Close() })
	session := "containers-test-" + t.Name()
	t.Setenv("IDEMQ_CONTAINERS_SESSION", session)
	return cli, session
}

// running returns the IDs of the containers labelled with session.
func running(t *testing.T, cli *testcontainers.DockerClient, session string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", "idemq.session="+session)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestImagesCoverServices(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(containers.Images)), slices.Sorted(maps.Keys(testenv.Services())); !slices.Equal(got, want) {
		t.Errorf("images for %q, testenv's servers are %q", got, want)
	}
}

func TestImageOverride(t *testing.T) {
	t.Setenv("IDEMQ_ROCKETMQ5_IMAGE", "")
	if got := containers.Image("rocketmq5"); got != containers.Images["rocketmq5"] {
		t.Errorf("Image(rocketmq5) = %q, want the default %q", got, containers.Images["rocketmq5"])
	}
	t.Setenv("IDEMQ_ROCKETMQ5_IMAGE", "localhost/rocketmq:mine")
	if got := containers.Image("rocketmq5"); got != "localhost/rocketmq:mine" {
		t.Errorf("Image(rocketmq5) = %q, want the override", got)
	}
}

func TestUnknownServer(t *testing.T) {
	if _, err := containers.Start(t.Context(), "pulsar", io.Discard); err == nil {
		t.Fatal("Start(pulsar) succeeded")
	}
}

// TestStartStop checks withservers' contract on a container of each of
// these servers: the server serves at the address its variable names, a
// client reaches it there, and Stop removes the container. (The script's
// suites cover the others.)
func TestStartStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reach func(t *testing.T, addr string)
	}{
		{"redis", func(t *testing.T, addr string) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			if err := rdb.Ping(t.Context()).Err(); err != nil {
				t.Errorf("PING %s: %v", addr, err)
			}
		}},
		{"kafka", func(t *testing.T, addr string) {
			if ids := testenv.KafkaBrokerIDs(t, addr); !slices.Equal(ids, []int32{1}) {
				t.Errorf("live brokers at %s: %v, want [1]", addr, ids)
			}
		}},
		{"nats", func(t *testing.T, url string) {
			addr, ok := strings.CutPrefix(url, "nats://")
			if !ok {
				t.Fatalf("URL %q is not nats://host:port", url)
			}
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			info, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatalf("greeting from %s: %v", addr, err)
			}
			if !strings.HasPrefix(info, "INFO ") || !strings.Contains(info, `"jetstream":true`) {
				t.Errorf("greeting from %s without JetStream: %s", addr, info)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, session := engine(t)
			srv, err := containers.Start(t.Context(), tc.name, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s at %s, started in %v", tc.name, srv.Version, srv.Addr, srv.Started.Round(time.Millisecond))
			if want := testenv.Services()[tc.name]; srv.Env[want] != srv.Addr || len(srv.Env) != 1 {
				t.Errorf("Env = %v, want %s=%s", srv.Env, want, srv.Addr)
			}
			tc.reach(t, srv.Addr)
			if ids := running(t, cli, session); len(ids) != 1 {
				t.Errorf("%d containers while running, want 1", len(ids))
			}
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			if ids := running(t, cli, session); len(ids) != 0 {
				t.Errorf("containers %q left after Stop", ids)
			}
		})
	}
}

// TestFailedStartRemoves checks that a start that fails removes what it had
// started: here a name server container whose image has no RocketMQ.
func TestFailedStartRemoves(t *testing.T) {
	cli, session := engine(t)
	t.Setenv("IDEMQ_ROCKETMQ_IMAGE", containers.Image("redis"))
	if srv, err := containers.Start(t.Context(), "rocketmq", io.Discard); err == nil {
		srv.Stop()
		t.Fatalf("rocketmq from %s started", containers.Image("redis"))
	}
	if ids := running(t, cli, session); len(ids) != 0 {
		t.Errorf("containers %q left after a failed start", ids)
	}
}
