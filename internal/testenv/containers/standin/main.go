// Command standin is the entry point of the stand-in images that
// scripts/standin-images.sh builds from Debian's packages on machines with a
// container engine but no image registry. It gives each image the part of
// its official image's contract that the container harness and
// docker/compose.yaml use, so that they run unchanged on either:
//
//   - redis-server without --protected-mode runs with --protected-mode no,
//     as the redis image's entry point does: clients come from outside the
//     container.
//   - mariadbd, on an empty /var/lib/mysql, first creates the system tables,
//     then the root account for any host (MARIADB_ROOT_PASSWORD or
//     MARIADB_ALLOW_EMPTY_ROOT_PASSWORD), MARIADB_DATABASE, and
//     MARIADB_USER with MARIADB_PASSWORD (MYSQL_* are accepted too).
//     Invoked as healthcheck.sh, it reports whether the server greets a
//     client on its socket.
//   - postgres, on an empty $PGDATA, runs initdb for POSTGRES_USER with
//     POSTGRES_PASSWORD, lets in every host by POSTGRES_HOST_AUTH_METHOD
//     (default scram-sha-256), and creates POSTGRES_DB; it runs as the
//     postgres account.
//   - /etc/kafka/docker/run, apache/kafka's command, configures and starts
//     Kafka from the KAFKA_* variables as that image's run script does:
//     CLUSTER_ID defaults to the image's, KAFKA_LISTENERS to
//     KAFKA_ADVERTISED_LISTENERS on 0.0.0.0, and Kafka's own
//     kafka.docker.KafkaDockerWrapper turns the variables into
//     /opt/kafka/config/server.properties and formats the storage; the JVMs
//     take KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_OPTS as
//     kafka-run-class.sh gives them. (The image's fallback to its default
//     single-node configuration when no KAFKA_* variable is set is not
//     kept: the stand-in has no distribution's config directory.)
//
// As in the official images, the first start initialises through a
// temporary server without networking, so a server logs that it is ready
// twice, and the stand-in is the ENTRYPOINT with the server's command line
// as CMD. Any other command runs as it is.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

const (
	mariadbData   = "/var/lib/mysql"
	mariadbSocket = "/run/mysqld/mysqld.sock"
	mariadbShare  = "/usr/share/mysql"
	pgSocketDir   = "/var/run/postgresql"
	// apache/kafka's command and directories.
	kafkaRun     = "/etc/kafka/docker/run"
	kafkaDefault = "/etc/kafka/docker"
	kafkaMounted = "/mnt/shared/config"
	kafkaConfig  = "/opt/kafka/config"
	kafkaLibs    = "/opt/kafka/libs"
	// kafkaClusterID is the image's CLUSTER_ID when none is set
	// (docker/resources/common-scripts/configureDefaults).
	kafkaClusterID = "5L6g3nShT-eMCtK--X86sw"
	// initTimeout bounds a first start's temporary server.
	initTimeout = 2 * time.Minute
)

func main() {
	if filepath.Base(os.Args[0]) == "healthcheck.sh" {
		if err := mariadbHealthy(); err != nil {
			fmt.Fprintln(os.Stderr, "healthcheck:", err)
			os.Exit(1)
		}
		return
	}
	args := os.Args[1:]
	if len(args) == 0 {
		fail(errors.New("no command"))
	}
	if args[0] == kafkaRun {
		fail(kafka())
	}
	var err error
	switch filepath.Base(args[0]) {
	case "redis-server":
		if !slices.Contains(args, "--protected-mode") {
			args = append(args, "--protected-mode", "no")
		}
		err = execPath(args)
	case "mariadbd", "mysqld":
		err = mariadb(args)
	case "postgres":
		err = postgres(args)
	default:
		err = execPath(args)
	}
	fail(err)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "standin:", err)
	os.Exit(1)
}

// execPath replaces this process with args[0], found on PATH.
func execPath(args []string) error {
	bin, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	return syscall.Exec(bin, args, os.Environ())
}

// env returns MARIADB_name, else MYSQL_name.
func env(name string) string {
	if v, ok := os.LookupEnv("MARIADB_" + name); ok {
		return v
	}
	return os.Getenv("MYSQL_" + name)
}

func mariadb(args []string) error {
	bin, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	// mariadbd refuses to run as root unless told to; the stand-in has no
	// other account.
	args = append(args, "--user=root", "--datadir="+mariadbData, "--socket="+mariadbSocket)
	if err := os.MkdirAll(filepath.Dir(mariadbSocket), 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(mariadbData, "mysql")); errors.Is(err, os.ErrNotExist) {
		if err := mariadbInit(bin, args); err != nil {
			return fmt.Errorf("mariadb first start: %w", err)
		}
	}
	return syscall.Exec(bin, args, os.Environ())
}

// mariadbInit creates the system tables as mariadb-install-db does, then
// the accounts and database through a temporary server on the socket only.
func mariadbInit(bin string, args []string) error {
	rootPassword := env("ROOT_PASSWORD")
	if rootPassword == "" && env("ALLOW_EMPTY_ROOT_PASSWORD") == "" {
		return errors.New("set MARIADB_ROOT_PASSWORD or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD")
	}
	if err := os.MkdirAll(mariadbData, 0o755); err != nil {
		return err
	}
	sqlText := []string{"create database if not exists mysql;", "use mysql;", "SET @auth_root_socket=NULL;"}
	for _, f := range []string{"mysql_system_tables.sql", "mysql_performance_tables.sql",
		"mysql_system_tables_data.sql", "fill_help_tables.sql", "maria_add_gis_sp_bootstrap.sql", "mysql_sys_schema.sql"} {
		b, err := os.ReadFile(filepath.Join(mariadbShare, f))
		if err != nil {
			return err
		}
		sqlText = append(sqlText, string(b))
	}
	boot := exec.Command(bin, "--bootstrap", "--user=root", "--datadir="+mariadbData, "--log-warnings=0",
		"--enforce-storage-engine=", "--max_allowed_packet=8M", "--net_buffer_length=16K")
	boot.Stdin = strings.NewReader(strings.Join(sqlText, "\n"))
	boot.Stdout, boot.Stderr = os.Stdout, os.Stderr
	if err := boot.Run(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}

	stmts := []string{
		"CREATE USER 'root'@'%' IDENTIFIED BY " + quoteSQL(rootPassword),
		"GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION",
	}
	if rootPassword != "" {
		stmts = append(stmts, "SET PASSWORD FOR 'root'@'localhost' = PASSWORD("+quoteSQL(rootPassword)+")")
	}
	db := env("DATABASE")
	if db != "" {
		stmts = append(stmts, "CREATE DATABASE IF NOT EXISTS `"+db+"`")
	}
	if u := env("USER"); u != "" && u != "root" {
		stmts = append(stmts, "CREATE USER "+quoteSQL(u)+"@'%' IDENTIFIED BY "+quoteSQL(env("PASSWORD")))
		if db != "" {
			stmts = append(stmts, "GRANT ALL ON `"+db+"`.* TO "+quoteSQL(u)+"@'%'")
		}
	}
	stmts = append(stmts, "SHUTDOWN")
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", mariadbSocket
	return withTempServer(exec.Command(bin, append(args[1:], "--skip-networking")...), nil, "mysql", cfg.FormatDSN(), stmts)
}

func quoteSQL(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// withTempServer starts cmd, waits until driver connects to dsn, runs
// stmts, and waits for the server to exit: the last statement, or stop if
// it is not nil, ends it.
func withTempServer(cmd *exec.Cmd, stop func(*os.Process) error, driver, dsn string, stmts []string) error {
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	err := runWhenUp(ctx, exited, driver, dsn, stmts)
	if err == nil && stop != nil {
		err = stop(cmd.Process)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	select {
	case err := <-exited:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return errors.New("temporary server did not stop")
	}
}

func runWhenUp(ctx context.Context, exited chan error, driver, dsn string, stmts []string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for db.PingContext(ctx) != nil {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("temporary server exited: %v", err)
		case <-ctx.Done():
			return errors.New("temporary server not up")
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(s)[0], err)
		}
	}
	return nil
}

// mariadbHealthy reports whether the server sends its greeting on the
// socket: it accepts connections and has opened its tables.
func mariadbHealthy() error {
	c, err := net.DialTimeout("unix", mariadbSocket, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 5))
	return err
}

func postgres(args []string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	data := os.Getenv("PGDATA")
	if data == "" {
		return errors.New("PGDATA is not set")
	}
	for _, d := range []string{data, pgSocketDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
	}
	// initdb and the server insist on a private data directory.
	if err := os.Chmod(data, 0o700); err != nil {
		return err
	}
	bin, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := postgresInit(bin, data, cred); err != nil {
			return fmt.Errorf("postgres first start: %w", err)
		}
	}
	if err := syscall.Setgid(gid); err != nil {
		return err
	}
	if err := syscall.Setuid(uid); err != nil {
		return err
	}
	return syscall.Exec(bin, args, os.Environ())
}

func postgresInit(bin, data string, cred *syscall.Credential) error {
	pgUser := cmp.Or(os.Getenv("POSTGRES_USER"), "postgres")
	password := os.Getenv("POSTGRES_PASSWORD")
	method := os.Getenv("POSTGRES_HOST_AUTH_METHOD")
	if method == "" {
		if password == "" {
			return errors.New("set POSTGRES_PASSWORD or POSTGRES_HOST_AUTH_METHOD")
		}
		method = "scram-sha-256"
	}
	pwfile := filepath.Join(data, "..", ".pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
		return err
	}
	initArgs := []string{"-D", data, "--username=" + pgUser, "-E", "UTF8", "--locale=C",
		"--auth-local=trust", "--auth-host=" + method}
	if password != "" {
		initArgs = append(initArgs, "--pwfile="+pwfile)
	}
	initdb := exec.Command(filepath.Join(filepath.Dir(bin), "initdb"), initArgs...)
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Stdout, initdb.Stderr = os.Stdout, os.Stderr
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	extra := fmt.Sprintf("\nhost all all all %s\n", method)
	if err := appendFile(filepath.Join(data, "pg_hba.conf"), extra); err != nil {
		return err
	}
	if err := appendFile(filepath.Join(data, "postgresql.conf"), "\nlisten_addresses = '*'\n"); err != nil {
		return err
	}
	var stmts []string
	if db := os.Getenv("POSTGRES_DB"); db != "" && db != "postgres" {
		stmts = append(stmts, `CREATE DATABASE "`+db+`"`)
	}
	tmp := exec.Command(bin, "-D", data, "-c", "listen_addresses=", "-k", pgSocketDir)
	tmp.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	dsn := fmt.Sprintf("host=%s user=%s dbname=postgres sslmode=disable", pgSocketDir, pgUser)
	// SIGINT is PostgreSQL's fast shutdown.
	stop := func(p *os.Process) error { return p.Signal(syscall.SIGINT) }
	return withTempServer(tmp, stop, "pgx", dsn, stmts)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// kafka does what apache/kafka's run, configure and launch scripts do.
func kafka() error {
	java, err := exec.LookPath("java")
	if err != nil {
		return err
	}
	if os.Getenv("CLUSTER_ID") == "" {
		os.Setenv("CLUSTER_ID", kafkaClusterID)
	}
	roles, advertised := os.Getenv("KAFKA_PROCESS_ROLES"), os.Getenv("KAFKA_ADVERTISED_LISTENERS")
	if roles == "controller" && advertised != "" {
		return errors.New("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller")
	}
	if _, ok := os.LookupEnv("KAFKA_LISTENERS"); !ok && roles != "controller" && advertised != "" {
		os.Setenv("KAFKA_LISTENERS", kafkaAnyHost.ReplaceAllString(advertised, "://0.0.0.0:"))
	}
	// The wrapper writes the configuration and formats the storage; a
	// storage formatted by an earlier start is kept, as the image keeps it.
	setup := exec.Command(java, slices.Concat(kafkaJVM("-Xmx256M"), []string{"kafka.docker.KafkaDockerWrapper", "setup",
		"--default-configs-dir", kafkaDefault, "--mounted-configs-dir", kafkaMounted, "--final-configs-dir", kafkaConfig})...)
	out, err := setup.CombinedOutput()
	os.Stdout.Write(out)
	if err != nil && !strings.Contains(strings.ToLower(string(out)), "already formatted") {
		return fmt.Errorf("kafka setup: %w", err)
	}
	return syscall.Exec(java, slices.Concat([]string{java}, kafkaJVM("-Xmx1G -Xms1G"),
		[]string{"kafka.Kafka", filepath.Join(kafkaConfig, "server.properties")}), os.Environ())
}

// kafkaAnyHost finds the host of each listener, as the image's sed does.
var kafkaAnyHost = regexp.MustCompile(`://[^:]*:`)

// kafkaJVM is the JVM's options as kafka-run-class.sh makes them from the
// KAFKA_*_OPTS variables, heap being its caller's default heap.
func kafkaJVM(heap string) []string {
	perf := cmp.Or(os.Getenv("KAFKA_JVM_PERFORMANCE_OPTS"), "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "+
		"-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
	return slices.Concat(strings.Fields(cmp.Or(os.Getenv("KAFKA_HEAP_OPTS"), heap)), strings.Fields(perf),
		strings.Fields(os.Getenv("KAFKA_OPTS")), []string{"-cp", filepath.Join(kafkaLibs, "*")})
}
