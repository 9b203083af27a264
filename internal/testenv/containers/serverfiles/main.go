// Command serverfiles prints where testenv keeps a server's files,
// fetching them into its cache first if they are not there yet:
//
//	go run ./serverfiles rocketmq 5.5.0   # the jars of a RocketMQ release (the proxy's too for 5.x)
//	go run ./serverfiles kafka            # the jars of the Apache Kafka release testenv runs
//	go run ./serverfiles nats             # the nats-server binary testenv runs
//
// scripts/standin-images.sh copies them into its stand-in images, so that
// the containers run the servers withservers runs.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/idemq/idemq/internal/testenv"
)

const usage = "usage: serverfiles rocketmq RELEASE | kafka | nats"

func main() {
	ctx := context.Background()
	var path string
	var err error
	switch args := os.Args[1:]; {
	case len(args) == 2 && args[0] == "rocketmq":
		path, err = testenv.RocketMQInstall(ctx, args[1], !strings.HasPrefix(args[1], "4."))
	case len(args) == 1 && args[0] == "kafka":
		path, err = testenv.KafkaInstall(ctx)
	case len(args) == 1 && args[0] == "nats":
		path, err = testenv.NATSInstall(ctx)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}
