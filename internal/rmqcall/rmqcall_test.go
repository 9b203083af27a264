package rmqcall_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/rmqcall"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// TestMasters asks a real name server for a topic's route: each broker
// name maps to the master's address.
func TestMasters(t *testing.T) {
	ns := testenv.RocketMQ(t)
	topic := fmt.Sprintf("rmqcall-%d-%d", os.Getpid(), time.Now().UnixNano())
	testenv.RocketMQTopic(t, topic, 1)
	got, err := rmqcall.Masters(t.Context(), ns, topic)
	if err != nil {
		t.Fatal(err)
	}
	want, err := testenv.RocketMQMasters(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for name, addr := range got {
		if name == "" || !strings.Contains(addr, ":") {
			t.Errorf("Masters: %q => %q", name, addr)
		}
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	slices.Sort(want)
	if !slices.Equal(addrs, want) {
		t.Errorf("Masters(%s) = %v, want the addresses %v", topic, got, want)
	}
}

func TestCallAnswerCode(t *testing.T) {
	ns := testenv.RocketMQ(t)
	_, err := rmqcall.Call(t.Context(), ns, rmqcall.ReqGetRouteInfoByTopic, map[string]string{"topic": "no-such-topic-rmqcall"}, nil)
	var re *rmqcall.ResponseError
	if !errors.As(err, &re) || re.Code != rmqcall.RespTopicNotExist || !strings.Contains(err.Error(), "response code 17") {
		t.Errorf("route of a missing topic: %v, want a ResponseError of code 17 (TOPIC_NOT_EXIST)", err)
	}
}
