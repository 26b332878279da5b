package history

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseDSNForms(t *testing.T) {
	for _, c := range []struct{ in, backend, where, err string }{
		{in: "host=db.internal user=reckon password=s3cret-pw dbname=results", backend: BackendPostgres,
			where: "host=db.internal user=reckon password=xxxxx dbname=results"},
		{in: "host = db port=5432 password='a b\\'c' sslmode=require", backend: BackendPostgres,
			where: "host=db port=5432 password=xxxxx sslmode=require"},
		{in: "dbname=results", backend: BackendPostgres, where: "dbname=results"},
		{in: "postgres://db/reckon?sslmode=require&password=s3cret-pw", backend: BackendPostgres,
			where: "postgres://db/reckon?password=xxxxx&sslmode=require"},
		{in: "postgres://u:s3cret-pw@db/reckon?sslpassword=k3y-pw", backend: BackendPostgres,
			where: "postgres://u:xxxxx@db/reckon?sslpassword=xxxxx"},
		{in: "sqlite://a=b.db", backend: BackendSQLite, where: "a=b.db"},
		{in: "runs/history.db", backend: BackendSQLite, where: "runs/history.db"},
		{in: "a=b.db", err: `"a" is not a PostgreSQL connection keyword`},
		{in: "host=db user=reckon pasword=s3cret-pw", err: `"pasword" is not a PostgreSQL connection keyword`},
		{in: "host=db password='s3cret-pw", err: "unterminated quote"},
		{in: "host=db dbname", err: `"dbname" has no '='`},
	} {
		b, _, w, err := ParseDSN(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDSN(%q) error %v, want %q", c.in, err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseDSN(%q): the error shows the password: %v", c.in, err)
			}
			continue
		}
		if err != nil || b != c.backend || w != c.where {
			t.Errorf("ParseDSN(%q) = %s, %q, %v; want %s, %q", c.in, b, w, err, c.backend, c.where)
		}
	}
}

// A keyword DSN or a URL with ?password= that cannot be reached is an error naming the store
// without its password, and never becomes a SQLite file in the working directory.
func TestOpenUnreachablePostgresRedactsAndCreatesNoFile(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, dsn := range []string{
		"host=127.0.0.1 port=1 user=reckon password=s3cret-pw dbname=results connect_timeout=2 sslmode=disable",
		"postgres://reckon@127.0.0.1:1/results?password=s3cret-pw&connect_timeout=2&sslmode=disable",
		"postgres://reckon:s3cret-pw@127.0.0.1:1/results?connect_timeout=2&sslmode=disable",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := Open(ctx, dsn)
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("%s: opened", dsn)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("the error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the error does not name the store: %v", err)
		}
	}
	if ents, _ := os.ReadDir("."); len(ents) > 0 {
		t.Errorf("files created in the working directory: %v", ents)
	}
}
