// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb into a temporary
// directory, postgres on a free local port, stopped and removed at the end. It finds the server
// binaries in $RECKON_PG_BIN, on PATH, or under /usr/lib/postgresql/*/bin (Debian's
// `postgresql` package, which .ci/run installs); as root it runs them as the `postgres` user
// through runuser. $RECKON_TEST_POSTGRES_DSN points the tests at an existing server instead.
//
// When no server can be had, Start returns an error that says why; tests skip with it.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Cluster is a running throwaway server.
type Cluster struct {
	// DSN is the postgres:// URL of the "postgres" database.
	DSN     string
	Port    int
	dir     string
	bin     string
	asUser  string
	created bool
	n       atomic.Int64
}

// BinDir returns the directory of initdb/pg_ctl/postgres, or an error naming where it looked.
func BinDir() (string, error) {
	if d := os.Getenv("RECKON_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("RECKON_PG_BIN=%s: no initdb there", d)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries not found (no $RECKON_PG_BIN, no initdb on PATH or under /usr/lib/postgresql/*/bin; Debian: apt-get install postgresql)")
}

func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start initialises and starts a cluster, or connects to $RECKON_TEST_POSTGRES_DSN.
func Start() (*Cluster, error) {
	if dsn := os.Getenv("RECKON_TEST_POSTGRES_DSN"); dsn != "" {
		return &Cluster{DSN: dsn}, nil
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, created: true}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, errors.New("running as root and there is no postgres user to run the server as (PostgreSQL refuses root)")
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, errors.New("running as root without runuser to start PostgreSQL as the postgres user")
		}
		c.asUser = "postgres"
	}
	dir, err := os.MkdirTemp("", "reckon-pg-")
	if err != nil {
		return nil, err
	}
	c.dir = dir
	if c.asUser != "" {
		if out, err := exec.Command("chown", "-R", c.asUser, dir).CombinedOutput(); err != nil {
			c.Stop()
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.cmd(60*time.Second, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.Port = port
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", port, dir)
	if out, err := c.cmd(60*time.Second, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "50", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		c.Stop()
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, nil
}

func (c *Cluster) cmd(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// NewDatabase creates an empty database and returns its DSN.
func (c *Cluster) NewDatabase(prefix string) (string, error) {
	name := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), c.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", c.DSN)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("CREATE DATABASE %s: %v", name, err)
	}
	u, err := url.Parse(c.DSN)
	if err != nil {
		return "", fmt.Errorf("postgres DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Stop stops a cluster this package started (immediately) and removes its files.
func (c *Cluster) Stop() {
	if !c.created || c.dir == "" {
		return
	}
	data := filepath.Join(c.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
		_, _ = c.cmd(30*time.Second, "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
	}
	_ = os.RemoveAll(c.dir)
	c.dir = ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
