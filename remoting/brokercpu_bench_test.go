package remoting_test

import (
	"context"
	"fmt"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// brokerPID returns the process of the one master broker registered with
// the name server ns, so that the end-to-end rows can charge its CPU time
// to the messages it served as they charge the store server's.
func brokerPID(ctx context.Context, ns string) (int, error) {
	masters, err := testenv.RocketMQMasters(ctx, ns)
	if err != nil {
		return 0, err
	}
	// Several brokers would each serve a share of the topic's queues; the
	// benchmark's server has one.
	if len(masters) != 1 {
		return 0, fmt.Errorf("broker CPU: %d master brokers registered with %s, want 1", len(masters), ns)
	}
	return testkit.ListenerPID(masters[0])
}
