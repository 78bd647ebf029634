// Package schema holds the Postgres migrations of the orchestrator, embedded
// in the binaries so that a worker or gateway can bring its database up to
// date at start without shipping loose SQL files.
//
// Files follow tern's naming (NNN_name.sql, numbered from 001 without gaps);
// the part below "---- create above / drop below ----" undoes the migration.
// tern evaluates each file as a Go text/template, so SQL must not contain
// "{{".
package schema

import "embed"

// FS holds the migration files at its root, ready for
// (*migrate.Migrator).LoadMigrations from github.com/jackc/tern/v2/migrate.
//
//go:embed *.sql
var FS embed.FS
