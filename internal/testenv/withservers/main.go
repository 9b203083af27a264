// Command withservers runs a command with real servers beside it: it starts
// the servers (unless their IDEMQ_* variable already names one), exports
// their addresses in the IDEMQ_* variables, runs the command, and stops the
// servers when it exits or on SIGINT/SIGTERM.
//
//	go run ./internal/testenv/withservers -only redis,rocketmq -- go run ./examples/receiver
//
// make test and make demo use it so that every test package shares one set
// of servers. internal/testenv/containers/withcontainers is its twin with
// the servers in containers.
package main

import (
	"os"

	"github.com/idemq/idemq/internal/testenv"
)

func main() {
	os.Exit(testenv.WithServers("withservers", os.Args[1:], testenv.Start))
}
