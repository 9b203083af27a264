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
// $IDEMQ_CACHE_DIR/rocketmq-<version>/lib (see [installJars]).
func RocketMQInstall(ctx context.Context, version string, proxy bool) (string, error) {
	props := []string{"-Drocketmq.version=" + version}
	if proxy {
		props = append(props, "-Drocketmq.proxy=true")
	}
	return installJars(ctx, "rocketmq", "rocketmq-"+version, rocketmqPOM, props...)
}

// cacheDir returns $IDEMQ_CACHE_DIR, default idemq under the user cache
// directory: where servers' jars and binaries are kept between runs.
func cacheDir() (string, error) {
	if root := os.Getenv("IDEMQ_CACHE_DIR"); root != "" {
		return root, nil
	}
	userCache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(userCache, "idemq"), nil
}

// installJars returns the directory $IDEMQ_CACHE_DIR/<home>/lib holding
// the jars pom resolves with the Maven properties props, resolving them on
// first use. They are resolved into a temporary sibling that is renamed
// into place, so concurrent test processes never see a partial directory;
// the loser of a race discards its copy. what names the server in errors.
func installJars(ctx context.Context, what, home string, pom []byte, props ...string) (string, error) {
	root, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("testenv: %s: %w", what, err)
	}
	home = filepath.Join(root, home)
	lib := filepath.Join(home, "lib")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}

	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("testenv: %s: resolve jars: %w", what, err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %s: %w", what, err)
	}
	tmp, err := os.MkdirTemp(home, ".lib-*")
	if err != nil {
		return "", fmt.Errorf("testenv: %s: %w", what, err)
	}
	defer os.RemoveAll(tmp)
	pomFile := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pomFile, pom, 0o644); err != nil {
		return "", fmt.Errorf("testenv: %s: %w", what, err)
	}
	// The output goes to the error only: Maven 3.8 prints stray colour
	// codes even with -q -B.
	var out bytes.Buffer
	args := append([]string{"-q", "-B", "-f", pomFile, "dependency:copy-dependencies",
		"-DoutputDirectory=" + filepath.Join(tmp, "lib")}, props...)
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: %s: resolve jars with %s: %w\n%s", what, pomFile, err, lastLines(out.String(), 30))
	}
	if err := os.Rename(filepath.Join(tmp, "lib"), lib); err != nil {
		if _, statErr := os.Stat(lib); statErr == nil {
			return lib, nil // another process resolved them first
		}
		return "", fmt.Errorf("testenv: %s: %w", what, err)
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
