package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/idemq/idemq/internal/rmqcall"
)

// CreateRocketMQTopic creates topic, or updates its queue counts, on every
// master broker registered with the name server at nameServer ("host:port"),
// and waits until the name server returns a route for it: a push consumer's
// Start fails while its topic has no route. Each broker gets queues read and
// write queues. It works with any RocketMQ 4.x cluster, not only one
// StartRocketMQ started, and with 5.x ([StartRocketMQ5]).
func CreateRocketMQTopic(ctx context.Context, nameServer, topic string, queues int) error {
	if queues < 1 {
		return fmt.Errorf("testenv: rocketmq: create topic %q: %d queues, want at least 1", topic, queues)
	}
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return fmt.Errorf("testenv: rocketmq: create topic %q: %w", topic, err)
	}
	if len(masters) == 0 {
		return fmt.Errorf("testenv: rocketmq: create topic %q: no master broker registered with %s", topic, nameServer)
	}
	for _, addr := range masters {
		_, err := rocketmqCall(ctx, addr, rmqcall.ReqUpdateAndCreateTopic, map[string]string{
			"topic":           topic,
			"defaultTopic":    "TBW102", // required by the request, unused by creation
			"readQueueNums":   strconv.Itoa(queues),
			"writeQueueNums":  strconv.Itoa(queues),
			"perm":            "6", // read and write
			"topicFilterType": "SINGLE_TAG",
			"topicSysFlag":    "0",
			"order":           "false",
		}, nil)
		if err != nil {
			return fmt.Errorf("testenv: rocketmq: create topic %q on %s: %w", topic, addr, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqTopicTimeout)
	defer cancel()
	t := time.NewTicker(rocketmqPollInterval)
	defer t.Stop()
	for {
		_, err := rocketmqCall(ctx, nameServer, rmqcall.ReqGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: rocketmq: create topic %q: no route: %w (last answer: %v)", topic, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// CreateRocketMQGroup creates the subscription group group, or updates it,
// on every master broker registered with the name server at nameServer, so
// that a message the group fails to consume is delivered at most
// 1+retryMaxTimes times before it goes to the group's dead-letter queue.
//
// A 4.x consumer (rocketmq-client-go's push consumer) sends its own
// MaxReconsumeTimes with each message it hands back, and the broker uses
// that, not the group's setting. A 5.x gRPC consumer (rocketmq-clients'
// golang/v5) has no such option: the proxy gives it retryMaxTimes+1 as its
// maximum delivery attempts and the group's retry policy as its backoff, so
// for 5.x the group is the only place to set them. The group created here
// has a customized retry policy of 1 s per attempt, like the test brokers'
// message delay levels; 4.x brokers ignore that field.
//
// Brokers create a group on a consumer's first heartbeat (with 16 retries)
// when it does not exist, so create it before the first consumer starts.
func CreateRocketMQGroup(ctx context.Context, nameServer, group string, retryMaxTimes int) error {
	return createRocketMQGroup(ctx, nameServer, group, retryMaxTimes, false)
}

// CreateRocketMQOrderlyGroup is [CreateRocketMQGroup] for an orderly group
// (consumeMessageOrderly): a 5.x proxy delivers its messages to gRPC
// consumers in order per message group (FIFO).
func CreateRocketMQOrderlyGroup(ctx context.Context, nameServer, group string, retryMaxTimes int) error {
	return createRocketMQGroup(ctx, nameServer, group, retryMaxTimes, true)
}

func createRocketMQGroup(ctx context.Context, nameServer, group string, retryMaxTimes int, orderly bool) error {
	if retryMaxTimes < 0 {
		return fmt.Errorf("testenv: rocketmq: create group %q: retryMaxTimes %d, want at least 0", group, retryMaxTimes)
	}
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return fmt.Errorf("testenv: rocketmq: create group %q: %w", group, err)
	}
	if len(masters) == 0 {
		return fmt.Errorf("testenv: rocketmq: create group %q: no master broker registered with %s", group, nameServer)
	}
	// SubscriptionGroupConfig, decoded by fastjson, which ignores fields
	// a release does not know (groupRetryPolicy, for 4.x).
	next := make([]int64, 18)
	for i := range next {
		next[i] = 1000 // ms
	}
	body, err := json.Marshal(map[string]any{
		"groupName":                    group,
		"consumeEnable":                true,
		"consumeFromMinEnable":         true,
		"consumeBroadcastEnable":       true,
		"retryQueueNums":               1,
		"retryMaxTimes":                retryMaxTimes,
		"brokerId":                     0,
		"whichBrokerWhenConsumeSlowly": 1,
		"consumeMessageOrderly":        orderly,
		"groupRetryPolicy": map[string]any{
			"type":                  "CUSTOMIZED",
			"customizedRetryPolicy": map[string]any{"next": next},
		},
	})
	if err != nil {
		return fmt.Errorf("testenv: rocketmq: create group %q: %w", group, err)
	}
	for _, addr := range masters {
		if _, err := rocketmqCall(ctx, addr, rmqcall.ReqUpdateAndCreateSubscriptionGroup, nil, body); err != nil {
			return fmt.Errorf("testenv: rocketmq: create group %q on %s: %w", group, addr, err)
		}
	}
	return nil
}

// RocketMQBrokerVersion asks the first master broker registered with the
// name server at nameServer for its version, such as "V4_9_7": tests log it
// whether they started the broker or were given one.
func RocketMQBrokerVersion(ctx context.Context, nameServer string) (string, error) {
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
	}
	if len(masters) == 0 {
		return "", fmt.Errorf("testenv: rocketmq: broker version: no master broker registered with %s", nameServer)
	}
	// A broker that started a moment ago fails this request until it has
	// sampled its statistics once.
	ctx, cancel := context.WithTimeout(ctx, rocketmqTopicTimeout)
	defer cancel()
	var body []byte
	for {
		if body, err = rocketmqCall(ctx, masters[0], rmqcall.ReqGetBrokerRuntimeInfo, nil, nil); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var info struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
	}
	v := info.Table["brokerVersionDesc"]
	if v == "" {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %s did not say", masters[0])
	}
	return v, nil
}

// RocketMQBacklog returns how many messages of topic group has not
// consumed on the master brokers registered with the name server at
// nameServer: the sum over topic's queues of each broker's end offset less
// the offset group committed there. A push consumer of rocketmq-client-go
// commits its offsets every 5 s, so the backlog of a group that consumed
// everything reaches 0 within about 5 s. A broker that is down is not
// counted: the caller checks that the ones it expects are registered
// ([RocketMQMasters]).
func RocketMQBacklog(ctx context.Context, nameServer, group, topic string) (int64, error) {
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return 0, fmt.Errorf("testenv: rocketmq: backlog of %s on %s: %w", group, topic, err)
	}
	if len(masters) == 0 {
		return 0, fmt.Errorf("testenv: rocketmq: backlog of %s on %s: no master broker registered with %s", group, topic, nameServer)
	}
	var backlog int64
	for _, addr := range masters {
		body, err := rocketmqCall(ctx, addr, rmqcall.ReqGetConsumeStats, map[string]string{"consumerGroup": group, "topic": topic}, nil)
		if err != nil {
			return 0, fmt.Errorf("testenv: rocketmq: backlog of %s on %s at %s: %w", group, topic, addr, err)
		}
		for _, m := range rocketmqOffsetsRE.FindAllSubmatch(body, -1) {
			end, _ := strconv.ParseInt(string(m[1]), 10, 64)
			committed, _ := strconv.ParseInt(string(m[2]), 10, 64)
			backlog += end - committed
		}
	}
	return backlog, nil
}

// rocketmqOffsetsRE finds each queue's offsets in a ConsumeStats body. Its
// offsetTable's keys are objects (fastjson), which encoding/json rejects;
// fastjson writes the fields in name order.
var rocketmqOffsetsRE = regexp.MustCompile(`"brokerOffset":(\d+),"consumerOffset":(\d+)`)

// RocketMQMasters returns the addresses of the master brokers registered
// with the name server at nameServer, as it lists them now.
func RocketMQMasters(ctx context.Context, nameServer string) ([]string, error) {
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return nil, fmt.Errorf("testenv: rocketmq: %w", err)
	}
	return masters, nil
}

// rocketmqMasterAddrsRE finds the master (broker id 0) in each brokerAddrs
// map of a cluster info body. The name server writes integer map keys
// unquoted ({0:"host:port"}), which encoding/json rejects.
var rocketmqMasterAddrsRE = regexp.MustCompile(`"brokerAddrs":\{(?:[^}]*,)?0:"([^"]+)"`)

// rocketmqMasters returns the addresses of the master brokers registered
// with the name server.
func rocketmqMasters(ctx context.Context, nameServer string) ([]string, error) {
	body, err := rocketmqCall(ctx, nameServer, rmqcall.ReqGetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	var masters []string
	for _, m := range rocketmqMasterAddrsRE.FindAllSubmatch(body, -1) {
		masters = append(masters, string(m[1]))
	}
	return masters, nil
}

// rocketmqCall is rmqcall.Call within rocketmqCallTimeout.
// rocketmq-client-go's admin client cannot list brokers, drops the broker's
// answer to a topic creation and logs every call to standard output.
func rocketmqCall(ctx context.Context, addr string, code int, fields map[string]string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, rocketmqCallTimeout)
	defer cancel()
	return rmqcall.Call(ctx, addr, code, fields, body)
}
