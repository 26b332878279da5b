package history

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// The forms of a history DSN: a SQLite file path or sqlite://PATH, a postgres:// or
// postgresql:// URL, or a libpq keyword/value string ("host=db user=reckon password=... dbname=
// results"). Anything else is refused rather than taken for a file name: a keyword DSN used as
// a SQLite path would put the run into a throwaway file named after the password.

// pgKeywords are the libpq connection keywords (PostgreSQL 17, "Parameter Key Words").
var pgKeywords = []string{
	"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth",
	"channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
	"fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
	"sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode",
	"sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version",
	"ssl_max_protocol_version", "krbsrvname", "gsslib", "gssdelegation", "service",
	"target_session_attrs", "load_balance_hosts",
	// pgx's own settings, which it accepts in both forms.
	"pool_max_conns", "statement_cache_capacity", "default_query_exec_mode",
}

// secretKeys are the connection parameters whose values are secrets: never printed.
var secretKeys = []string{"password", "sslpassword"}

// redacted replaces a secret in everything reckon prints.
const redacted = "xxxxx"

// keywordStart matches the start of a keyword DSN: a keyword and '='.
var keywordStart = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\s*=`)

// ParseDSN returns the backend and the driver's data source for a DSN: a file path or
// sqlite://PATH (SQLite), a postgres:// or postgresql:// URL, or a libpq keyword/value string
// (PostgreSQL). where names the store in messages, every secret (password, sslpassword)
// redacted. It checks syntax only.
func ParseDSN(dsn string) (backend, source, where string, err error) {
	dsn = strings.TrimSpace(dsn)
	switch {
	case dsn == "":
		return "", "", "", errors.New("history DSN is empty (expected a file path, sqlite://PATH, postgres://USER@HOST/DB or host=... dbname=...)")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, perr := url.Parse(dsn)
		if perr != nil {
			return "", "", "", fmt.Errorf("history DSN: %v (expected postgres://USER:PASSWORD@HOST:PORT/DB)", redactText(redactErr(perr).Error(), dsnSecrets(dsn)))
		}
		return BackendPostgres, dsn, redactURL(u), nil
	case strings.Contains(dsn, "://") && !strings.HasPrefix(dsn, "sqlite://"):
		scheme, _, _ := strings.Cut(dsn, "://")
		return "", "", "", fmt.Errorf("history DSN: unknown scheme %q (expected a file path, sqlite://PATH, postgres://... or host=... dbname=...)", scheme)
	case keywordStart.MatchString(dsn):
		kvs, kerr := parseKeywordDSN(dsn)
		if kerr != nil {
			return "", "", "", fmt.Errorf("history DSN: %w (a PostgreSQL keyword DSN is host=HOST user=USER password=... dbname=DB; a SQLite file whose name looks like key=value is sqlite://NAME)", kerr)
		}
		var parts []string
		for _, kv := range kvs {
			v := kv[1]
			if slices.Contains(secretKeys, kv[0]) {
				v = redacted
			}
			parts = append(parts, kv[0]+"="+quoteKeywordValue(v))
		}
		return BackendPostgres, dsn, strings.Join(parts, " "), nil
	}
	p := strings.TrimPrefix(dsn, "sqlite://")
	if p == "" {
		return "", "", "", errors.New("history DSN sqlite://: empty path")
	}
	if strings.ContainsAny(p, "?#") {
		return "", "", "", fmt.Errorf("history DSN %q: a SQLite path may not hold '?' or '#'", dsn)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(30000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return BackendSQLite, "file:" + p + "?" + q.Encode(), p, nil
}

// parseKeywordDSN splits a libpq keyword/value string into its pairs, in order: keyword = value,
// whitespace around '=' allowed, a value single-quoted when it holds spaces (\' and \\ escaped).
// Every keyword must be a libpq keyword.
func parseKeywordDSN(dsn string) ([][2]string, error) {
	var out [][2]string
	s := dsn
	for {
		s = strings.TrimLeft(s, " \t\n\r")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("%q has no '=': expected keyword=value", firstField(s))
		}
		key := strings.TrimSpace(s[:eq])
		if !slices.Contains(pgKeywords, key) {
			return nil, fmt.Errorf("%q is not a PostgreSQL connection keyword", key)
		}
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			i, closed := 1, false
			for ; i < len(s); i++ {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					i++
					val.WriteByte(s[i])
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("the value of %s has an unterminated quote", key)
			}
			s = s[i+1:]
		} else {
			end := strings.IndexAny(s, " \t\n\r")
			if end < 0 {
				end = len(s)
			}
			for i := 0; i < end; i++ {
				if s[i] == '\\' && i+1 < end {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[end:]
		}
		out = append(out, [2]string{key, val.String()})
	}
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

// quoteKeywordValue writes a value of a keyword DSN as libpq reads it.
func quoteKeywordValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// redactURL is u without its secrets: the password of its user info and the values of its
// secret query parameters.
func redactURL(u *url.URL) string {
	c := *u
	q := c.Query()
	changed := false
	for _, k := range secretKeys {
		if q.Has(k) {
			q.Set(k, redacted)
			changed = true
		}
	}
	if changed {
		c.RawQuery = q.Encode()
	}
	if _, has := c.User.Password(); has {
		c.User = url.UserPassword(c.User.Username(), redacted)
	}
	return c.String()
}

// dsnSecrets returns the secret values a DSN holds (to remove them from any text).
func dsnSecrets(dsn string) []string {
	dsn = strings.TrimSpace(dsn)
	var out []string
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
			for _, k := range secretKeys {
				out = append(out, u.Query()[k]...)
			}
		} else if _, rest, ok := strings.Cut(dsn, "://"); ok {
			// Unparsable: everything between "user:" and '@' may be a password.
			if at := strings.LastIndexByte(rest, '@'); at > 0 {
				if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
					out = append(out, pw)
				}
			}
		}
	} else if keywordStart.MatchString(dsn) {
		if kvs, err := parseKeywordDSN(dsn); err == nil {
			for _, kv := range kvs {
				if slices.Contains(secretKeys, kv[0]) {
					out = append(out, kv[1])
				}
			}
		}
	}
	var keep []string
	for _, s := range out {
		if s != "" && s != redacted {
			keep = append(keep, s)
		}
	}
	return keep
}

// redactText removes every secret from text, as written and URL-escaped.
func redactText(text string, secrets []string) string {
	for _, s := range secrets {
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			text = strings.ReplaceAll(text, form, redacted)
		}
	}
	return text
}

// redactErr drops a URL (which may hold a password) from a url.Parse error.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
