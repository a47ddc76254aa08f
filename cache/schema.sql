-- jitk kernel cache, format 1. Embedded into the library at build time and
-- run at every open (each statement is idempotent). cache/FORMAT.md says
-- what each column holds and which rules readers follow.

CREATE TABLE IF NOT EXISTS meta (
  name  TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

INSERT OR IGNORE INTO meta (name, value) VALUES ('format', '1');
INSERT OR IGNORE INTO meta (name, value) VALUES ('created_by', 'jitk');

-- One row per compiled kernel image: the image, its names and its log go
-- in together, in one transaction, so no crash leaves half an entry.
-- Small columns come first so that scans (sizes, stamps) never read the
-- large ones, which SQLite keeps in overflow pages.
CREATE TABLE IF NOT EXISTS entries (
  key         BLOB NOT NULL UNIQUE CHECK (length(key) = 16),
  kind        INTEGER NOT NULL,      -- 1 cubin, 2 PTX
  bytes       INTEGER NOT NULL,      -- what the row counts against the size cap
  created     INTEGER NOT NULL,      -- Unix seconds
  last_used   INTEGER NOT NULL,      -- Unix seconds, written in batches
  compile_ms  REAL NOT NULL,
  target      TEXT NOT NULL,         -- sm_90, compute_90
  label       TEXT NOT NULL,         -- the program name, for listings
  checksum    BLOB NOT NULL CHECK (length(checksum) = 16),
  material    BLOB NOT NULL,         -- the key material, compared on every hit
  names       BLOB NOT NULL,         -- name expressions and lowered names
  log         TEXT NOT NULL,         -- NVRTC's log (ptxas's report)
  image       BLOB NOT NULL          -- the cubin or PTX
);

CREATE INDEX IF NOT EXISTS entries_by_last_used ON entries (last_used);

-- Counters summed over every process that used this database.
CREATE TABLE IF NOT EXISTS stats (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
