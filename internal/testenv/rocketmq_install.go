package testenv

import (
	"bytes"
	"context"
	_ "embed" // the pom below
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// rocketmqPOM resolves the server jars; RocketMQInstall passes
// -Drocketmq.version so that the Go code names the release, and
// -Drocketmq.proxy for 5.x, whose proxy (and the broker inside it) the
// pom's "proxy" profile adds.
//
//go:embed rocketmq/pom.xml
var rocketmqPOM []byte

// RocketMQInstall returns the directory holding the jars of the given
// release (name server and broker, plus the proxy if proxy is set),
// resolving them with Maven on first use into
// $IDEMQ_CACHE_DIR/rocketmq-<version>/lib. They are resolved into a
// temporary sibling that is renamed into place, so concurrent test processes
// never see a partial directory; the loser of a race discards its copy.
func RocketMQInstall(ctx context.Context, version string, proxy bool) (string, error) {
	root := os.Getenv("IDEMQ_CACHE_DIR")
	if root == "" {
		userCache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("testenv: rocketmq: %w", err)
		}
		root = filepath.Join(userCache, "idemq")
	}
	home := filepath.Join(root, "rocketmq-"+version)
	lib := filepath.Join(home, "lib")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}

	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: resolve jars: %w", err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	tmp, err := os.MkdirTemp(home, ".lib-*")
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	defer os.RemoveAll(tmp)
	pom := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pom, rocketmqPOM, 0o644); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	// The output goes to the error only: Maven 3.8 prints stray colour
	// codes even with -q -B.
	var out bytes.Buffer
	args := []string{"-q", "-B", "-f", pom, "dependency:copy-dependencies",
		"-DoutputDirectory=" + filepath.Join(tmp, "lib"), "-Drocketmq.version=" + version}
	if proxy {
		args = append(args, "-Drocketmq.proxy=true")
	}
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: resolve jars with %s: %w\n%s", pom, err, lastLines(out.String(), 30))
	}
	if err := os.Rename(filepath.Join(tmp, "lib"), lib); err != nil {
		if _, statErr := os.Stat(lib); statErr == nil {
			return lib, nil // another process resolved them first
		}
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	return lib, nil
}

// rocketmqJarVersion reads the release from the broker jar's name.
func rocketmqJarVersion(lib string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(lib, "rocketmq-broker-*.jar"))
	if err != nil || len(jars) != 1 {
		return "", fmt.Errorf("testenv: rocketmq: want one rocketmq-broker jar in %s, found %d (remove the directory to resolve again)", lib, len(jars))
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "rocketmq-broker-"), ".jar"), nil
}
