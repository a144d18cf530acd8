"""The text of the PostgreSQL store's one-event append procedures (migrations 0005, 0006).

Kept apart from :mod:`ctxledger.eventstore.postgres_schema`, which applies them: ``@.``
stands for the ledger's schema, written in at migration time (a procedure that
commits cannot pin ``search_path``). A shipped text never changes: a new migration
replaces the procedure with a new text.
"""

from ctxledger.errors import StoreError


def unflushed_waits(definition: str) -> str:
    """Migration 0006's ``ctxledger_insert`` (2-16 events), from 0003's `definition`: rows
    that wait for ``ctxledger_await`` commit with ``synchronous_commit`` off (as
    ``ctxledger_append_one``'s waiting rows: a seal's commit flushes them)."""
    sealed = "            IF o_sealed THEN\n                PERFORM ctxledger_seal(p_channel);\n"
    if sealed not in definition:
        raise StoreError("ctxledger_insert is not the function migration 0003 created")
    unflushed = (
        "IF NOT o_sealed THEN\n"
        "                PERFORM set_config('synchronous_commit', 'off', true);\n"
        "            ELSE"
    )
    return definition.replace(sealed, sealed.replace("IF o_sealed THEN", unflushed), 1)


def flushing_seal(definition: str) -> str:
    """Migration 0006's ``ctxledger_seal``, from 0003's `definition`: a seal that seals rows
    commits with ``synchronous_commit`` on, whatever its session's. The rows it seals may
    have been committed without their own flush, and their writers answer as soon as they
    see them sealed: a seal made by a ``durability="normal"`` process (whose session
    commits unflushed) must still reach the disk before them."""
    sealing = "            IF cardinality(v_pids) > 0 THEN\n"
    if sealing not in definition:
        raise StoreError("ctxledger_seal is not the function migration 0003 created")
    flush = "                PERFORM set_config('synchronous_commit', 'on', true);\n"
    return definition.replace(sealing, sealing + flush, 1)


#: migration ``0005_one_call_appends``: a one-event append in one round trip
APPEND_ONE_0005 = r"""
CREATE PROCEDURE @.ctxledger_append_one(
    p_lock bigint, p_channel text, p_stream text, p_expected bigint, p_stream_json bytea,
    p_event_id text, p_kind text, p_schema integer, p_payload bytea, p_ident bytea,
    INOUT o_version bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_sid bigint;
    v_seq bigint;
    v_hash text;
BEGIN
    SELECT s.stream_id INTO v_sid FROM @.streams AS s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        INSERT INTO @.streams (stream_id, stream)
            VALUES (nextval('@.streams_id_seq'), p_stream) ON CONFLICT (stream) DO NOTHING;
        SELECT s.stream_id INTO v_sid FROM @.streams AS s WHERE s.stream = p_stream;
    END IF;
    SELECT coalesce(max(e.version), 0) INTO o_version FROM @.events AS e
        WHERE e.stream_id = v_sid;
    IF p_expected IS NOT NULL AND p_expected <> o_version THEN
        RAISE EXCEPTION 'stream % is at version %, not %', p_stream, o_version, p_expected
            USING ERRCODE = 'CL409',
                  DETAIL = json_build_array(p_stream, p_expected, o_version)::text;
    END IF;
    o_version := o_version + 1;
    IF pg_try_advisory_xact_lock(p_lock) THEN
        -- nobody is sealing: seal what waits, then write this row sealed after it
        SELECT o_seq, o_hash INTO v_seq, v_hash FROM @.ctxledger_seal(p_channel);
        v_seq := v_seq + 1;
        v_hash := encode(sha256(
            convert_to('["' || v_hash || '",' || v_seq || ',', 'UTF8') || p_stream_json
            || convert_to(',' || o_version || ',', 'UTF8') || p_ident || '\x5d'::bytea
            || p_payload), 'hex');
        INSERT INTO @.events (seq, event_id, stream_id, version, kind, schema, payload, hash)
            VALUES (v_seq, p_event_id, v_sid, o_version, p_kind, p_schema, p_payload, v_hash);
        PERFORM pg_notify(p_channel, v_seq::text);
        RETURN;
    END IF;
    INSERT INTO @.events (pid, event_id, stream_id, version, kind, schema, payload,
                          hdr_stream, hdr_ident)
        VALUES (nextval('@.events_pid_seq') * 1000 + 1, p_event_id, v_sid, o_version, p_kind,
                p_schema, p_payload, p_stream_json, p_ident);
    COMMIT;  -- durable, unsealed; the flush is shared with the other appenders' commits
    -- the sealer of the moment usually seals this row: look a few times (18 ms in all)
    -- before queueing for the lock, whose hand-overs from waiter to waiter each need
    -- a wake-up; whoever finds the lock free seals
    FOR i IN 1 .. 8 LOOP
        IF NOT EXISTS (SELECT 1 FROM @.events WHERE event_id = p_event_id AND seq IS NULL)
        THEN
            RETURN;
        END IF;
        IF pg_try_advisory_xact_lock(p_lock) THEN
            PERFORM @.ctxledger_seal(p_channel);
            RETURN;
        END IF;
        PERFORM pg_sleep(0.0005 * i);
    END LOOP;
    -- a long seal (a big batch): wait for it; seal if it did not see this row (or died)
    PERFORM pg_advisory_xact_lock(p_lock);
    IF EXISTS (SELECT 1 FROM @.events WHERE event_id = p_event_id AND seq IS NULL) THEN
        PERFORM @.ctxledger_seal(p_channel);
    END IF;
END
$fn$
"""


#: migration ``0006_lean_one_call``: the same steps, rows and hashes as 0005 with fewer
#: statements: the stream's id and version in one read; with the lock free, the seal is
#: called only when a row waits (the probe walks the partial index ``events_unsealed``),
#: else the tail is read here (``right(hash, 64)``: a linked SQLite row chains from its
#: link, as in 0004); a row that must wait for a seal is committed without its own flush
#: (the seal's flush covers it)
APPEND_ONE_0006 = r"""
CREATE OR REPLACE PROCEDURE @.ctxledger_append_one(
    p_lock bigint, p_channel text, p_stream text, p_expected bigint, p_stream_json bytea,
    p_event_id text, p_kind text, p_schema integer, p_payload bytea, p_ident bytea,
    INOUT o_version bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_sid bigint;
    v_seq bigint;
    v_hash text;
BEGIN
    SELECT s.stream_id, (SELECT coalesce(max(e.version), 0) FROM @.events AS e
                         WHERE e.stream_id = s.stream_id)
        INTO v_sid, o_version FROM @.streams AS s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        INSERT INTO @.streams (stream_id, stream)
            VALUES (nextval('@.streams_id_seq'), p_stream) ON CONFLICT (stream) DO NOTHING;
        SELECT s.stream_id, (SELECT coalesce(max(e.version), 0) FROM @.events AS e
                             WHERE e.stream_id = s.stream_id)
            INTO v_sid, o_version FROM @.streams AS s WHERE s.stream = p_stream;
    END IF;
    IF p_expected IS NOT NULL AND p_expected <> o_version THEN
        RAISE EXCEPTION 'stream % is at version %, not %', p_stream, o_version, p_expected
            USING ERRCODE = 'CL409',
                  DETAIL = json_build_array(p_stream, p_expected, o_version)::text;
    END IF;
    o_version := o_version + 1;
    IF pg_try_advisory_xact_lock(p_lock) THEN
        -- nobody is sealing: seal what waits (if anything), then write this row sealed
        PERFORM FROM @.events AS e WHERE e.seq IS NULL ORDER BY e.pid LIMIT 1;
        IF FOUND THEN
            SELECT o_seq, o_hash INTO v_seq, v_hash FROM @.ctxledger_seal(p_channel);
        ELSE
            SELECT e.seq, right(e.hash, 64) INTO v_seq, v_hash FROM @.events AS e
                WHERE e.seq IS NOT NULL ORDER BY e.seq DESC LIMIT 1;
            IF NOT FOUND THEN
                v_seq := 0;
                v_hash := repeat('0', 64);
            END IF;
        END IF;
        v_seq := v_seq + 1;
        v_hash := encode(sha256(
            convert_to('["' || v_hash || '",' || v_seq || ',', 'UTF8') || p_stream_json
            || convert_to(',' || o_version || ',', 'UTF8') || p_ident || '\x5d'::bytea
            || p_payload), 'hex');
        INSERT INTO @.events (seq, event_id, stream_id, version, kind, schema, payload, hash)
            VALUES (v_seq, p_event_id, v_sid, o_version, p_kind, p_schema, p_payload, v_hash);
        PERFORM pg_notify(p_channel, v_seq::text);
        RETURN;
    END IF;
    INSERT INTO @.events (pid, event_id, stream_id, version, kind, schema, payload,
                          hdr_stream, hdr_ident)
        VALUES (nextval('@.events_pid_seq') * 1000 + 1, p_event_id, v_sid, o_version, p_kind,
                p_schema, p_payload, p_stream_json, p_ident);
    -- committed without waiting for its flush: the row is unsealed (no reader sees it, the
    -- caller is not answered) until a seal commits, and a seal's commit flushes the WAL up
    -- to itself, this row's insert included; a crash before that loses an append nobody
    -- was told about (its writer gets an error and re-sends)
    PERFORM set_config('synchronous_commit', 'off', true);
    COMMIT;
    -- the sealer of the moment usually seals this row: look a few times (18 ms in all)
    -- before queueing for the lock; whoever finds the lock free seals
    FOR i IN 1 .. 8 LOOP
        IF NOT EXISTS (SELECT 1 FROM @.events WHERE event_id = p_event_id AND seq IS NULL)
        THEN
            RETURN;
        END IF;
        IF pg_try_advisory_xact_lock(p_lock) THEN
            PERFORM @.ctxledger_seal(p_channel);
            RETURN;
        END IF;
        PERFORM pg_sleep(0.0005 * i);
    END LOOP;
    -- a long seal (a big batch): wait for it; seal if it did not see this row (or died)
    PERFORM pg_advisory_xact_lock(p_lock);
    IF EXISTS (SELECT 1 FROM @.events WHERE event_id = p_event_id AND seq IS NULL) THEN
        PERFORM @.ctxledger_seal(p_channel);
    END IF;
END
$fn$
"""
