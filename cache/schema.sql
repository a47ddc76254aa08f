-- jitk kernel cache, format 1. Embedded into the library at build time and
-- run once, in one transaction, when a database is new. cache/FORMAT.md
-- says what each column holds and the rules every reader follows.
--
-- SQLite keeps each CREATE statement's text, comments inside it included,
-- and parses it again whenever a process opens the database; so comments
-- stay out of the statements, and the schema stays small: four tables, no
-- secondary index. Opening must be quick, since a disk hit in a fresh
-- process pays for it.

PRAGMA application_id = 1785295979;

-- One row per compiled kernel image; times are Unix milliseconds. The image, its names and its log go in
-- together, so no crash leaves half an entry. id is the key's first 63 bits
-- (a rowid lookup, no index); the full key is compared on every hit. Small
-- columns come first so that scans of them never read the large ones,
-- which SQLite keeps in overflow pages.
CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, key BLOB NOT NULL, kind INTEGER NOT NULL, bytes INTEGER NOT NULL, created INTEGER NOT NULL, last_used INTEGER NOT NULL, compile_ms REAL NOT NULL, target TEXT NOT NULL, label TEXT NOT NULL, checksum BLOB NOT NULL, material BLOB NOT NULL, names BLOB NOT NULL, log TEXT NOT NULL, image BLOB NOT NULL);

-- Counters summed over every process, one row per counter, fixed ids.
CREATE TABLE IF NOT EXISTS stats (id INTEGER PRIMARY KEY, name TEXT NOT NULL, value INTEGER NOT NULL);

-- Which entries answer a request (the key of the source, options and
-- headers given as strings); each entry's key material holds the files its
-- compile read, checked before it is served. No rowid: the primary key
-- is the index by request.
CREATE TABLE IF NOT EXISTS requests (request INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (request, id)) WITHOUT ROWID;

-- Content hashes of large files a compile read, valid while the file's
-- stat data is unchanged.
CREATE TABLE IF NOT EXISTS files (dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (dev, ino)) WITHOUT ROWID;

-- Last: marks the database as set up, in format 1.
PRAGMA user_version = 1;
