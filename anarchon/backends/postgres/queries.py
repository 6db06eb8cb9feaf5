"""The SQL of the PostgreSQL backend, as templates over the backend's table names.

Every statement uses the database clock. Times are stored as ``bigint`` epoch
milliseconds. Identifiers reach SQL only through ``psycopg.sql.Identifier``; values
only as parameters. The syntax floor is PostgreSQL 9.5 (``ON CONFLICT``, ``CREATE INDEX
IF NOT EXISTS``, multi-argument ``unnest``); data-modifying CTEs need 9.1.

Clock: ``now()``, not ``clock_timestamp()``. Every statement below runs in its own short
transaction (autocommit, or the claim's one-round-trip transaction that only takes an
advisory lock before it), so ``now()`` is the statement's start, read once: all the
comparisons and the new ``lease_until`` of one statement agree on a single instant.
``clock_timestamp()`` is volatile and is re-read per row and per call, so a statement
could judge "expired" and "late" at different instants. The only cost of ``now()`` is a
lock wait: a claim that queued behind another for the job's lock judges by the time it
was sent, a few milliseconds early, which can only make it refuse a takeover it might
have won (the lease looks less expired) or start a lease slightly earlier (shorter).
"""

from __future__ import annotations

from typing import Final

from ..base import EARLY_TOLERANCE_MS

FORMAT_VERSION: Final = "1"

# ``{p}`` opens every statement: typed parameters and the clock, read once.
_NOW_MS: Final = "floor(extract(epoch FROM now()) * 1000)::bigint"
# The time leases are judged expired against: now, or -1 (nothing is expired) while the
# server has been up for less than the claim's lease, so a lease that lapsed while the
# server was down is not taken over (nor replaced) before its runner could renew it or
# record its outcome. Needs the row's lease_ms and now_ms.
_EXPIRY_MS: Final = ("CASE WHEN now_ms >= floor(extract(epoch FROM pg_postmaster_start_time())"
                     " * 1000)::bigint + lease_ms THEN now_ms ELSE -1 END")

# A takeover's expiry: a run its runner handed over is free at once (nobody will renew
# it), even while the server is young. Needs the run's row ``r`` and ``p.expiry_ms``.
_HELD_UNTIL_MS: Final = "CASE WHEN r.handed_over THEN p.now_ms ELSE p.expiry_ms END"

SETUP_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtext('anarchon:setup'), hashtext(%(table)s))"

# The jobs' advisory locks, taken in one order (by key) so that two batches over the
# same jobs queue instead of deadlocking.
JOB_LOCK: Final = """
SELECT count(pg_advisory_xact_lock(hashtext(%(table)s), k.key))
FROM (SELECT DISTINCT hashtext(j) AS key FROM unnest(%(jobs)s::text[]) AS j ORDER BY 1) AS k
"""

EXISTING: Final = """
SELECT to_regclass(%(runs)s) IS NOT NULL, to_regclass(%(attempts)s) IS NOT NULL,
       to_regclass(%(jobs)s) IS NOT NULL, to_regclass(%(meta)s) IS NOT NULL,
       to_regclass(%(control)s) IS NOT NULL AND to_regclass(%(changes)s) IS NOT NULL
       AND to_regclass(%(offers)s) IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%(jobs)s)
               AND attname = 'registered' AND NOT attisdropped)
"""

SCHEMA_EXISTS: Final = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s)"

CREATE_SCHEMA: Final = "CREATE SCHEMA IF NOT EXISTS {schema}"

READ_VERSION: Final = "SELECT value FROM {meta} WHERE key = 'format_version'"

CREATE: Final = (
    """CREATE TABLE IF NOT EXISTS {runs} (
        job text NOT NULL,
        slot bigint NOT NULL,
        status text NOT NULL,
        owner text NOT NULL,
        attempt integer NOT NULL,
        counted integer NOT NULL,
        handed_over boolean NOT NULL DEFAULT false,
        lease_until bigint NOT NULL,
        PRIMARY KEY (job, slot))""",
    "CREATE INDEX IF NOT EXISTS {runs_running} ON {runs} (job, slot) WHERE status = 'running'",
    """CREATE TABLE IF NOT EXISTS {attempts} (
        id bigserial PRIMARY KEY,
        job text NOT NULL,
        slot bigint NOT NULL,
        attempt integer NOT NULL,
        instance text NOT NULL,
        manual boolean NOT NULL,
        reason text NOT NULL,
        status text NOT NULL,
        started_at bigint NOT NULL,
        finished_at bigint,
        error text)""",
    "CREATE INDEX IF NOT EXISTS {attempts_job} ON {attempts} (job, started_at, id)",
    "CREATE INDEX IF NOT EXISTS {attempts_run} ON {attempts} (job, slot, attempt)",
    """CREATE TABLE IF NOT EXISTS {jobs} (
        name text PRIMARY KEY,
        kind text NOT NULL,
        schedule text NOT NULL,
        first_seen bigint NOT NULL,
        registered bigint)""",
    "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {triggers} (
        id bigserial PRIMARY KEY,
        job text NOT NULL,
        data text,
        requested_at bigint NOT NULL)""",
    "INSERT INTO {meta} (key, value) VALUES ('format_version', %(version)s)",
)

REGISTER: Final = f"""
INSERT INTO {{jobs}} (name, kind, schedule, first_seen, registered)
SELECT j.name, j.kind, j.schedule, {_NOW_MS}, {_NOW_MS}
FROM unnest(%(names)s::text[], %(kinds)s::text[], %(schedules)s::text[]) AS j(name, kind, schedule)
ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, schedule = EXCLUDED.schedule,
    registered = EXCLUDED.registered
"""

KNOWN_JOBS: Final = "SELECT name, kind, schedule, registered FROM {jobs} ORDER BY name"

# The jobs' last registration time, added to a namespace an older anarchon made (the
# format version stays: older anarchons neither write nor read it).
ADD_REGISTERED: Final = "ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS registered bigint"

# `anarchon purge`: one statement empties the namespace, control records, change logs,
# offers and the generation included (the format version in meta stays).
PURGE: Final = """
WITH a AS (DELETE FROM {attempts} RETURNING 1), r AS (DELETE FROM {runs} RETURNING 1),
     t AS (DELETE FROM {triggers} RETURNING 1), j AS (DELETE FROM {jobs} RETURNING 1),
     c AS (DELETE FROM {control} RETURNING 1), l AS (DELETE FROM {changes} RETURNING 1),
     o AS (DELETE FROM {offers} RETURNING 1),
     g AS (DELETE FROM {meta} WHERE key = 'control_generation' RETURNING 1)
SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM r) + (SELECT count(*) FROM t)
       + (SELECT count(*) FROM j) + (SELECT count(*) FROM c) + (SELECT count(*) FROM l)
       + (SELECT count(*) FROM o)
"""

# Claims and finishes take arrays, one element per request (``idx`` numbers them; the
# answers come back in ``idx`` order): a lone claim is a batch of one, so a batch is
# judged by the very rules of a lone claim. Each statement must hold a job at most once
# (the caller cuts a batch into rounds: see anarchon.backends.batches), since all its
# rows are judged against one snapshot and joined to the tables by job.

# New slots (scheduled or catch-up). Runs after the jobs' advisory locks, so its snapshot
# already holds every earlier claim of the jobs; ON CONFLICT is the last line of defence.
# The version fence is the ``stored`` subselect (0: no control record): a claim planned
# from an older record is 'stale' and writes nothing (change_control takes the same lock).
# Overlap looks at every other slot, not only earlier ones: with a jitter longer than the
# interval, slot N's claim can arrive after slot N+1 started, and must not run beside it.
CLAIM_NEW: Final = f"""
WITH q AS (
    SELECT c.*, {_NOW_MS} AS now_ms
    FROM unnest(%(idx)s::integer[], %(jobs)s::text[], %(slots)s::bigint[],
                %(owners)s::text[], %(reasons)s::text[], %(lease_ms)s::bigint[],
                %(max_late_ms)s::bigint[], %(catch_up)s::boolean[],
                %(catch_up_ms)s::bigint[], %(skip_overlap)s::boolean[],
                %(versions)s::integer[], %(one_off)s::boolean[])
         AS c(idx, job, slot, owner, reason, lease_ms, max_late_ms, catch_up, catch_up_ms,
              skip_overlap, version, one_off)
),
p AS (
    SELECT q.*, {_EXPIRY_MS} AS expiry_ms,
           COALESCE((SELECT k.version FROM {{control}} k WHERE k.job = q.job), 0) AS stored
    FROM q
),
interrupted AS (
    UPDATE {{runs}} r SET status = 'interrupted'
    FROM p
    WHERE r.job = p.job AND r.slot < p.slot AND r.status = 'running'
      AND r.lease_until <= p.expiry_ms AND p.slot - p.now_ms <= {EARLY_TOLERANCE_MS}
      AND p.stored <= p.version
    RETURNING r.job, r.slot, r.attempt, p.now_ms
),
interrupted_history AS (
    UPDATE {{attempts}} a SET status = 'interrupted', finished_at = i.now_ms, error = NULL
    FROM interrupted i
    WHERE a.job = i.job AND a.slot = i.slot AND a.attempt = i.attempt
      AND a.status = 'running' AND NOT a.manual
    RETURNING a.id
),
existing AS (
    SELECT p.idx, r.status FROM {{runs}} r JOIN p ON r.job = p.job AND r.slot = p.slot
),
verdict AS (
    SELECT p.idx, CASE
        WHEN p.slot - p.now_ms > {EARLY_TOLERANCE_MS} THEN 'early'
        WHEN p.stored > p.version THEN 'stale'
        WHEN CASE WHEN p.catch_up
                  THEN p.slot <= p.now_ms - p.catch_up_ms OR NOT EXISTS (
                       SELECT 1 FROM {{jobs}} j WHERE j.name = p.job
                                                  AND (p.one_off OR j.first_seen <= p.slot))
                  ELSE p.now_ms > p.slot + p.max_late_ms END THEN 'late'
        WHEN EXISTS (SELECT 1 FROM existing e WHERE e.idx = p.idx AND e.status = 'skipped')
             THEN 'overlap'
        WHEN EXISTS (SELECT 1 FROM existing e WHERE e.idx = p.idx) THEN 'taken'
        WHEN p.skip_overlap AND EXISTS (
             SELECT 1 FROM {{runs}} o
             WHERE o.job = p.job AND o.slot <> p.slot AND o.status = 'running'
               AND o.lease_until > p.expiry_ms) THEN 'overlap'
        ELSE 'won' END AS outcome
    FROM p
),
inserted AS (
    INSERT INTO {{runs}} (job, slot, status, owner, attempt, counted, handed_over, lease_until)
    SELECT p.job, p.slot, CASE WHEN v.outcome = 'won' THEN 'running' ELSE 'skipped' END,
           p.owner, CASE WHEN v.outcome = 'won' THEN 1 ELSE 0 END,
           CASE WHEN v.outcome = 'won' THEN 1 ELSE 0 END, false, p.now_ms + p.lease_ms
    FROM p JOIN verdict v ON v.idx = p.idx
    WHERE v.outcome = 'won' OR (v.outcome = 'overlap'
                                AND NOT EXISTS (SELECT 1 FROM existing e WHERE e.idx = p.idx))
    ON CONFLICT (job, slot) DO NOTHING
    RETURNING job, slot, status
),
history AS (
    INSERT INTO {{attempts}} (job, slot, attempt, instance, manual, reason, status, started_at)
    SELECT p.job, p.slot, 1, p.owner, false, p.reason, 'running', p.now_ms
    FROM p JOIN inserted i ON i.job = p.job AND i.slot = p.slot WHERE i.status = 'running'
    RETURNING job
)
SELECT p.idx,
       CASE WHEN v.outcome = 'won' AND h.job IS NULL THEN 'taken' ELSE v.outcome END,
       CASE WHEN h.job IS NULL THEN 0 ELSE 1 END,
       p.now_ms
FROM p JOIN verdict v ON v.idx = p.idx LEFT JOIN history h ON h.job = p.job
ORDER BY p.idx
"""

# Takeovers of running attempts whose lease expired. The UPDATE re-checks its WHERE on
# the newest row version (READ COMMITTED), so a renewal that committed after this
# statement's snapshot wins over the verdict: the result is then 'taken'.
CLAIM_TAKEOVER: Final = f"""
WITH q AS (
    SELECT c.*, {_NOW_MS} AS now_ms
    FROM unnest(%(idx)s::integer[], %(jobs)s::text[], %(slots)s::bigint[],
                %(owners)s::text[], %(lease_ms)s::bigint[], %(expected)s::integer[],
                %(max_attempts)s::integer[])
         AS c(idx, job, slot, owner, lease_ms, expected, max_attempts)
),
p AS (SELECT q.*, {_EXPIRY_MS} AS expiry_ms FROM q),
verdict AS (
    SELECT p.idx, CASE
        WHEN r.status IS DISTINCT FROM 'running' OR r.attempt <> p.expected
             OR r.lease_until > {_HELD_UNTIL_MS} THEN 'taken'
        WHEN NOT r.handed_over AND r.counted >= p.max_attempts THEN 'exhausted'
        ELSE 'won' END AS outcome
    FROM p LEFT JOIN {{runs}} r ON r.job = p.job AND r.slot = p.slot
),
updated AS (
    UPDATE {{runs}} r SET
        status = CASE WHEN v.outcome = 'won' THEN 'running' ELSE 'interrupted' END,
        owner = CASE WHEN v.outcome = 'won' THEN p.owner ELSE r.owner END,
        attempt = CASE WHEN v.outcome = 'won' THEN r.attempt + 1 ELSE r.attempt END,
        counted = CASE WHEN v.outcome = 'won' THEN r.counted + 1 ELSE r.counted END,
        handed_over = false,
        lease_until = CASE WHEN v.outcome = 'won' THEN p.now_ms + p.lease_ms
                           ELSE r.lease_until END
    FROM p JOIN verdict v ON v.idx = p.idx
    WHERE r.job = p.job AND r.slot = p.slot AND v.outcome IN ('won', 'exhausted')
      AND r.status = 'running' AND r.attempt = p.expected
      AND r.lease_until <= {_HELD_UNTIL_MS}
    RETURNING p.idx, r.attempt, r.status
),
old_history AS (
    UPDATE {{attempts}} a SET status = 'interrupted', finished_at = p.now_ms, error = NULL
    FROM p JOIN updated u ON u.idx = p.idx
    WHERE a.job = p.job AND a.slot = p.slot
      AND a.attempt = p.expected AND a.status = 'running' AND NOT a.manual
    RETURNING a.id
),
new_history AS (
    INSERT INTO {{attempts}} (job, slot, attempt, instance, manual, reason, status, started_at)
    SELECT p.job, p.slot, u.attempt, p.owner, false, 'takeover', 'running', p.now_ms
    FROM p JOIN updated u ON u.idx = p.idx WHERE u.status = 'running'
    RETURNING id
)
SELECT p.idx,
       CASE WHEN v.outcome <> 'taken' AND u.idx IS NULL THEN 'taken' ELSE v.outcome END,
       CASE WHEN u.status = 'running' THEN u.attempt ELSE 0 END,
       p.now_ms
FROM p JOIN verdict v ON v.idx = p.idx LEFT JOIN updated u ON u.idx = p.idx
ORDER BY p.idx
"""

CONFIRM: Final = """
SELECT attempt FROM {runs}
WHERE job = %(job)s AND slot = %(slot)s AND owner = %(owner)s AND status = 'running'
  AND NOT handed_over
"""

# Renew every held lease (fenced) and read every watched run: one statement. The watched
# rows come from the statement's snapshot, taken before the renewals.
HEARTBEAT: Final = f"""
WITH p AS (
    SELECT %(owner)s::text AS owner, %(lease_ms)s::bigint AS lease_ms, {_NOW_MS} AS now_ms
),
held AS (
    SELECT * FROM unnest(%(held_jobs)s::text[], %(held_slots)s::bigint[],
                         %(held_attempts)s::integer[]) AS h(job, slot, attempt)
),
watched AS (
    SELECT * FROM unnest(%(watched_jobs)s::text[], %(watched_slots)s::bigint[]) AS w(job, slot)
),
renewed AS (
    UPDATE {{runs}} r SET lease_until = p.now_ms + p.lease_ms
    FROM p, held h
    WHERE r.job = h.job AND r.slot = h.slot AND r.attempt = h.attempt AND r.owner = p.owner
      AND r.status = 'running' AND NOT r.handed_over
    RETURNING r.job, r.slot
)
SELECT true, job, slot, '', 0, true, false, false FROM renewed
UNION ALL
SELECT false, r.job, r.slot, r.owner, r.attempt, r.status = 'running',
       r.lease_until <= p.now_ms, r.handed_over
FROM {{runs}} r JOIN watched w ON r.job = w.job AND r.slot = w.slot, p
UNION ALL
SELECT NULL, h.job, h.slot, '', 0, false, false, false
FROM held h
WHERE NOT EXISTS (SELECT 1 FROM {{runs}} r WHERE r.job = h.job AND r.slot = h.slot)
"""

# Hand-over: the lease ends now and the attempt stops counting towards max_attempts.
# A released run is announced on the table's channel (NOTIFY is sent at commit).
RELEASE: Final = f"""
WITH p AS (
    SELECT %(job)s::text AS job, %(slot)s::bigint AS slot, %(owner)s::text AS owner,
           %(attempt)s::integer AS attempt, {_NOW_MS} AS now_ms
),
released AS (
    UPDATE {{runs}} r SET lease_until = p.now_ms, handed_over = true, counted = r.counted - 1
    FROM p
    WHERE r.job = p.job AND r.slot = p.slot AND r.owner = p.owner AND r.attempt = p.attempt
      AND r.status = 'running' AND NOT r.handed_over
    RETURNING r.job
),
history AS (
    UPDATE {{attempts}} a SET status = 'interrupted', finished_at = p.now_ms, error = NULL
    FROM p
    WHERE EXISTS (SELECT 1 FROM released) AND a.job = p.job AND a.slot = p.slot
      AND a.attempt = p.attempt AND a.status = 'running' AND NOT a.manual
    RETURNING a.id
)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM history),
       (SELECT count(pg_notify(%(channel)s, json_build_object(
            'k', 'released', 'job', p.job, 'slot', p.slot, 'attempt', p.attempt)::text))
        FROM released, p)
"""

# Pruning sees the statement's snapshot, where the attempt being finished is still
# 'running': it is never deleted by its own finish (it may go at a later one). ``{source}``
# gives one row ``p`` (job, now_ms, history_size, history_ttl_ms) per job to prune;
# ``{skips}`` is ``=`` to bound the skip records, ``<>`` the attempts (each on its own).
_PRUNE_ANY: Final = """
pruned AS (
    DELETE FROM {{attempts}} a
    USING {source}
    WHERE a.job = p.job AND a.status <> 'running' AND a.status {skips} 'skipped'
      AND (a.id NOT IN (SELECT k.id FROM {{attempts}} k
                        WHERE k.job = p.job AND k.status {skips} 'skipped'
                        ORDER BY k.started_at DESC, k.id DESC LIMIT p.history_size)
           OR a.finished_at < p.now_ms - p.history_ttl_ms)
    RETURNING a.id
)"""
_PRUNE: Final = _PRUNE_ANY.replace("{skips}", "<>")
PRUNE_SKIPS: Final = _PRUNE_ANY.replace("{skips}", "=")

FINISH: Final = f"""
WITH p AS (
    SELECT f.*, {_NOW_MS} AS now_ms
    FROM unnest(%(idx)s::integer[], %(jobs)s::text[], %(slots)s::bigint[],
                %(owners)s::text[], %(attempts)s::integer[], %(statuses)s::text[],
                %(errors)s::text[], %(history_sizes)s::integer[],
                %(history_ttl_ms)s::bigint[], %(retain_ms)s::bigint[])
         AS f(idx, job, slot, owner, attempt, status, error, history_size, history_ttl_ms,
              retain_ms)
),
done AS (
    UPDATE {{runs}} r SET status = p.status, lease_until = p.now_ms
    FROM p
    WHERE r.job = p.job AND r.slot = p.slot AND r.owner = p.owner AND r.attempt = p.attempt
      AND r.status = 'running' AND NOT r.handed_over
    RETURNING p.idx
),
history AS (
    UPDATE {{attempts}} a SET status = p.status, finished_at = p.now_ms, error = p.error
    FROM p JOIN done d ON d.idx = p.idx
    WHERE a.job = p.job AND a.slot = p.slot
      AND a.attempt = p.attempt AND a.status = 'running' AND NOT a.manual
    RETURNING a.id
),
{_PRUNE.format(source="p JOIN done d ON d.idx = p.idx")},
old_runs AS (
    DELETE FROM {{runs}} r
    USING p JOIN done d ON d.idx = p.idx
    WHERE p.retain_ms > 0 AND r.job = p.job
      AND r.slot < p.now_ms - p.retain_ms AND r.slot <> p.slot AND r.status <> 'running'
    RETURNING r.slot
)
SELECT p.idx, d.idx IS NOT NULL FROM p LEFT JOIN done d ON d.idx = p.idx ORDER BY p.idx
"""

# A detail text on a running attempt (it stays running), fenced by (owner, attempt); the
# attempt's end replaces it (the interrupted updates above clear it, FINISH writes its own).
NOTE: Final = """
UPDATE {attempts} a SET error = %(text)s::text
WHERE a.job = %(job)s::text AND a.slot = %(slot)s::bigint AND a.attempt = %(attempt)s::integer
  AND a.status = 'running' AND NOT a.manual
  AND EXISTS (SELECT 1 FROM {runs} r
              WHERE r.job = a.job AND r.slot = a.slot AND r.attempt = a.attempt
                AND r.owner = %(owner)s::text AND r.status = 'running' AND NOT r.handed_over)
RETURNING a.id
"""

START_MANUAL: Final = """
INSERT INTO {attempts} (job, slot, attempt, instance, manual, reason, status, started_at)
VALUES (%(job)s, %(started_ms)s, 1, %(owner)s, true, 'manual', 'running', %(started_ms)s)
RETURNING id
"""

FINISH_MANUAL: Final = f"""
WITH p0 AS (
    SELECT %(id)s::bigint AS id, %(status)s::text AS status, %(error)s::text AS error,
           %(history_size)s::integer AS history_size,
           %(history_ttl_ms)s::bigint AS history_ttl_ms, {_NOW_MS} AS now_ms
),
done AS (
    UPDATE {{attempts}} a SET status = p0.status, finished_at = p0.now_ms, error = p0.error
    FROM p0
    WHERE a.id = p0.id AND a.manual AND a.status = 'running'
    RETURNING a.job
),
p AS (SELECT d.job, p0.now_ms, p0.history_size, p0.history_ttl_ms FROM done d, p0),
{_PRUNE.format(source="p")}
SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM pruned)
"""

HISTORY: Final = """
SELECT job, slot, instance, manual, attempt, reason, status, started_at, finished_at, error
FROM {attempts} WHERE job = %(job)s
ORDER BY started_at DESC, id DESC
LIMIT %(count)s
"""

UNFINISHED: Final = f"""
SELECT job, slot, owner, attempt, lease_until <= {_NOW_MS}, handed_over
FROM {{runs}} WHERE job = ANY(%(names)s::text[]) AND status = 'running'
ORDER BY job, slot
"""
