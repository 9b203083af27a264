// Command rocketmqjars prints the directory holding the jars of a RocketMQ
// release, resolving them from Maven Central into testenv's cache first if
// they are not there yet (the proxy's too for 5.x):
//
//	go run ./rocketmqjars 5.5.0
//
// scripts/standin-images.sh copies them into its stand-in images.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/idemq/idemq/internal/testenv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rocketmqjars RELEASE")
		os.Exit(2)
	}
	release := os.Args[1]
	lib, err := testenv.RocketMQInstall(context.Background(), release, !strings.HasPrefix(release, "4."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(lib)
}
