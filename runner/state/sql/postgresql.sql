-- The PostgreSQL state's statements, by name (runner.state.sql loads them; runner.state.store
-- and its parts run them through runner.state.postgres's connector). Parameters are named
-- (%(name)s); a list is bound as an array. A name whose SQL has several statements is one
-- change: they run in order in one transaction. A change on every call's path is one
-- statement (data-modifying WITH parts, which PostgreSQL applies together or not at all):
-- one round trip. Slots in braces are filled from runner's own names, never from input:
-- {changes}, the columns a change sets ("column = %(set_column)s", one per column, and,
-- when the item moves, its state and due time: runner.lifecycle.backfill and due);
-- {moved}, an item's state read from its columns; {item_columns}, every
-- column of an item; {table} and {columns} of `runner state copy`.
-- When an item is due counts on the database's clock: one clock for every host; a worker's
-- heartbeat on its host's (kept in step by NTP).
-- The SQLite twin of each is in sqlite.sql, under the same name.

-- ---------------------------------------------------------------- runs

-- start_run --
INSERT INTO runs (job_name, job_file, started_at, host, pid)
VALUES (%(job_name)s, %(job_file)s, %(started_at)s, %(host)s, %(pid)s) RETURNING id;

-- note_checks --
UPDATE runs SET counts = %(counts)s WHERE id = %(run_id)s;

-- end_run --
UPDATE runs SET ended_at = %(ended_at)s, exit_code = %(exit_code)s, counts = %(counts)s,
       message = %(message)s, digest = %(digest)s,
       -- A run resumed (a plan applied again) whose summary says something else now: what
       -- was mailed at its earlier end is not this summary.
       mailed = CASE WHEN digest = %(digest)s THEN mailed ELSE 0 END
WHERE id = %(run_id)s;

-- note_exit --
UPDATE runs SET exit_code = %(exit_code)s WHERE id = %(run_id)s;

-- stop_run --
-- A run stopped by an error: its end, code and why; its counts stay the checks' own.
UPDATE runs SET ended_at = %(ended_at)s, exit_code = %(exit_code)s, message = %(message)s
WHERE id = %(run_id)s AND ended_at IS NULL;

-- note_inputs --
UPDATE runs SET inputs = %(digest)s WHERE id = %(run_id)s;

-- note_lines --
UPDATE runs SET lines = %(lines)s WHERE id = %(run_id)s;

-- note_duplicates_allowed --
UPDATE runs SET allow_duplicates = 1 WHERE id = %(run_id)s;

-- note_mailed --
UPDATE runs SET mailed = 1 WHERE id = %(run_id)s;

-- work_left --
-- How many items the job has, how many a run would still work on, the latest change.
SELECT count(*) AS all_items,
       count(*) FILTER (WHERE step <> 'final' AND outcome <> 'conflict') AS open_items,
       max(updated_at) AS last_update
FROM items WHERE job_name = %(job_name)s;

-- runs --
SELECT id, started_at, ended_at, exit_code, counts, message, digest, mailed, inputs, lines,
       allow_duplicates
FROM runs WHERE job_name = %(job_name)s ORDER BY id;

-- run_calls --
-- The calls each run of the job sent, by step.
SELECT a.run_id, a.step, count(*) AS n
FROM attempts a JOIN runs r ON r.id = a.run_id
WHERE r.job_name = %(job_name)s GROUP BY a.run_id, a.step;

-- run_approvals --
SELECT a.* FROM approvals a JOIN runs r ON r.id = a.run_id WHERE r.job_name = %(job_name)s;

-- latest_runs --
-- The job's runs, those that ended first, the latest first.
SELECT id, started_at, ended_at, exit_code, counts, message, digest, mailed, inputs, lines,
       allow_duplicates
FROM runs WHERE job_name = %(job_name)s
ORDER BY ended_at IS NULL, ended_at DESC, id DESC;

-- approval --
SELECT * FROM approvals WHERE run_id = %(run_id)s;

-- note_approval --
INSERT INTO approvals (run_id, plan_sha256, planned_by, planned_on, planned_at, approved_by,
                       applied_by, applied_on, approved_at, planner_key, signers)
VALUES (%(run_id)s, %(plan_sha256)s, %(planned_by)s, %(planned_on)s, %(planned_at)s,
        %(approved_by)s, %(applied_by)s, %(applied_on)s, %(approved_at)s, %(planner_key)s,
        %(signers)s)
ON CONFLICT (run_id) DO UPDATE SET plan_sha256 = excluded.plan_sha256,
    planned_by = excluded.planned_by, planned_on = excluded.planned_on,
    planned_at = excluded.planned_at, approved_by = excluded.approved_by,
    applied_by = excluded.applied_by, applied_on = excluded.applied_on,
    approved_at = excluded.approved_at, planner_key = excluded.planner_key,
    signers = excluded.signers;

-- reopen_run --
-- The run's end cleared, this process its own; no row back while a live worker works it.
UPDATE runs SET ended_at = NULL, exit_code = NULL, host = %(host)s, pid = %(pid)s
WHERE id = %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM workers
                  WHERE run_id = %(run_id)s AND heartbeat_at > %(alive)s)
RETURNING id;

-- note_plan_file --
INSERT INTO plan_files (id, job_name, digest, content, made_at, run_id)
VALUES (%(id)s, %(job_name)s, %(digest)s, %(content)s, %(made_at)s, %(run_id)s)
ON CONFLICT (id) DO NOTHING;

-- plan_file --
SELECT * FROM plan_files WHERE id = %(id)s;

-- note_plan_applied --
UPDATE plan_files SET run_id = %(run_id)s WHERE id = %(id)s;

-- forget_run --
-- A run refused before it sent anything (an apply whose plan file was refused): no run.
DELETE FROM runs WHERE id = %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM attempts WHERE run_id = %(run_id)s);

-- ---------------------------------------------------------------- the rules of a batch

-- remember_rules --
-- A batch planned under four eyes stays under it: its first rules are kept, the approvals
-- only ever raised.
INSERT INTO batch_rules (job_name, four_eyes, approvals, payee_approvals, signers, plan_id,
                         recorded_at)
VALUES (%(job_name)s, 1, %(approvals)s, %(payee_approvals)s, %(signers)s, %(plan_id)s,
        %(recorded_at)s)
ON CONFLICT (job_name) DO UPDATE SET four_eyes = 1,
    approvals = greatest(batch_rules.approvals, excluded.approvals),
    payee_approvals = greatest(batch_rules.payee_approvals, excluded.payee_approvals);

-- batch_rules --
SELECT * FROM batch_rules WHERE job_name = %(job_name)s;

-- ---------------------------------------------------------------- the workers

-- workers --
-- The job's workers, each with its heartbeat (its host's clock) and its holder, the
-- latest heartbeat first.
SELECT * FROM workers WHERE job_name = %(job_name)s ORDER BY heartbeat_at DESC;

-- all_workers --
SELECT * FROM workers;

-- enlist --
-- A worker of the job, beside the others: those not heard from since alive are dead (their
-- claims are anyone's).
WITH dead AS (DELETE FROM workers WHERE job_name = %(job_name)s AND heartbeat_at <= %(alive)s)
INSERT INTO workers (worker_id, job_name, run_id, host, pid, boot_id, pid_ns, locked,
                     heartbeat_at)
VALUES (%(worker_id)s, %(job_name)s, 0, %(host)s, %(pid)s, %(boot_id)s, %(pid_ns)s, 0, %(now)s);

-- worker_started --
-- The run a worker works, once it has begun (the worker enlists as it starts).
UPDATE workers SET run_id = %(run_id)s, heartbeat_at = %(now)s WHERE worker_id = %(worker_id)s;

-- heartbeat --
UPDATE workers SET heartbeat_at = %(now)s WHERE worker_id = %(worker_id)s;

-- forget_worker --
-- A worker gone (it left, or its process is known dead): its claims are anyone's at once.
WITH freed AS (UPDATE items SET claimed_by = NULL
               WHERE job_name = %(job_name)s AND claimed_by = %(worker_id)s)
DELETE FROM workers WHERE worker_id = %(worker_id)s;

-- ---------------------------------------------------------------- items

-- item --
SELECT * FROM items WHERE external_id = %(external_id)s;

-- items --
SELECT * FROM items WHERE job_name = %(job_name)s ORDER BY row;

-- item_page --
-- The next page of the job's items after (row, after) in row order, each with when the
-- provider last answered its answered call.
SELECT i.*, (SELECT max(a.finished_at) FROM attempts a
             WHERE a.external_id = i.external_id AND a.step = %(answered)s
               AND a.result = 'ok') AS answered_at
FROM items i
WHERE i.job_name = %(job_name)s
  AND (i.row > %(row)s OR (i.row = %(row)s AND i.external_id > %(after)s))
ORDER BY i.row, i.external_id LIMIT %(size)s;

-- owners --
SELECT external_id, job_name FROM items WHERE external_id = ANY(%(ids)s);

-- items_by_id --
SELECT * FROM items WHERE external_id = ANY(%(ids)s);

-- insert_items --
COPY items ({item_columns}, state) FROM STDIN;

-- update_item --
UPDATE items SET {changes}, updated_at = %(updated_at)s WHERE external_id = %(external_id)s;

-- start_retry --
WITH retry AS (
    INSERT INTO retries (external_id, job_name, run_id, lineage, ref, previous_ref,
                         previous_status, previous_code, previous_message, changed, at)
    VALUES (%(external_id)s, %(job_name)s, %(run_id)s, %(lineage)s, %(ref)s,
            %(previous_ref)s, %(previous_status)s, %(previous_code)s,
            %(previous_message)s, %(changed)s, %(updated_at)s))
UPDATE items SET {changes}, due_at = {now}, updated_at = %(updated_at)s
WHERE external_id = %(external_id)s;

-- retries --
SELECT * FROM retries WHERE job_name = %(job_name)s ORDER BY id;

-- operations_sent --
-- Items of the kinds whose call reached the provider or may have (in doubt, settled,
-- unknown), of one order or of every one.
SELECT * FROM items
WHERE kind = ANY(%(kinds)s) AND provider_ref IS NOT NULL
  AND (intent IS NOT NULL OR outcome IN ('settled', 'unknown'))
  AND (%(order_id)s::text IS NULL OR provider_ref = %(order_id)s);

-- resolved --
-- What a person found, with its attempt row.
WITH attempt AS (
    INSERT INTO attempts (external_id, step, started_at, finished_at, result, request,
                          message)
    VALUES (%(external_id)s, %(step)s, %(updated_at)s, %(updated_at)s, %(result)s,
            %(request)s, %(note)s))
UPDATE items SET {changes}, updated_at = %(updated_at)s WHERE external_id = %(external_id)s;

-- found --
-- What reconcile found, only onto the item as it was read.
UPDATE items SET {changes}, updated_at = %(updated_at)s
WHERE external_id = %(external_id)s AND lineage = %(lineage)s AND attempt = %(attempt)s
  AND step = %(step)s AND outcome = %(outcome)s
RETURNING external_id;

-- found_attempt --
INSERT INTO attempts (external_id, step, request, started_at, finished_at, result, message)
VALUES (%(external_id)s, 'reconcile', %(request)s, %(updated_at)s, %(updated_at)s,
        %(result)s, %(note)s);

-- same_payments --
-- The first two items of the job paying each content, in row order (those failed with
-- nothing paid, and those held, left out).
SELECT content, external_id, row, outcome FROM (
    SELECT content, external_id, row, outcome,
           row_number() OVER (PARTITION BY content ORDER BY row) AS n
    FROM items
    WHERE job_name = %(job_name)s AND content = ANY(%(contents)s)
      AND outcome NOT IN ('failed', 'held')) AS ranked
WHERE n <= 2 ORDER BY row;

-- ---------------------------------------------------------------- attempts (rule 2)

-- begin_attempt --
-- The intent, committed before the call.
WITH attempt AS (
    INSERT INTO attempts (run_id, external_id, step, request, started_at)
    VALUES (%(run_id)s, %(external_id)s, %(step)s, %(request)s, %(updated_at)s)
    RETURNING id),
item AS (
    UPDATE items SET {changes}, updated_at = %(updated_at)s
    WHERE external_id = %(external_id)s)
SELECT id FROM attempt;

-- begin_attempt_answered --
-- The intent, with the previous call's answer and what it made of the item.
WITH attempt AS (
    INSERT INTO attempts (run_id, external_id, step, request, started_at)
    VALUES (%(run_id)s, %(external_id)s, %(step)s, %(request)s, %(updated_at)s)
    RETURNING id),
answered AS (
    UPDATE attempts SET finished_at = %(updated_at)s, result = 'ok', http_status = 200
    WHERE id = %(answered)s),
item AS (
    UPDATE items SET {changes}, updated_at = %(updated_at)s
    WHERE external_id = %(external_id)s)
SELECT id FROM attempt;

-- end_attempt --
WITH attempt AS (
    UPDATE attempts SET finished_at = %(updated_at)s, result = %(result)s,
           http_status = %(http_status)s, code = %(code)s, message = %(message)s
    WHERE id = %(attempt_id)s)
UPDATE items SET {changes}, updated_at = %(updated_at)s WHERE external_id = %(external_id)s;

-- attempts --
SELECT * FROM attempts WHERE external_id = %(external_id)s ORDER BY id;

-- ---------------------------------------------------------------- payee checks

-- payee_checks --
SELECT * FROM payee_checks WHERE account = ANY(%(accounts)s);

-- keep_payee_check --
INSERT INTO payee_checks (account, service, payer, identifier, account_status, holder,
                          checked_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (account) DO UPDATE SET service = excluded.service, payer = excluded.payer,
    identifier = excluded.identifier, account_status = excluded.account_status,
    holder = excluded.holder, checked_at = excluded.checked_at;

-- accept_payee --
-- One person's acceptance of a payee (its account and name), replacing their earlier one.
INSERT INTO accepted_payees (account, name, signer, job_name, external_id, accepted_by,
                             accepted_on, accepted_at, note, signature)
VALUES (%(account)s, %(name)s, %(signer)s, %(job_name)s, %(external_id)s,
        %(accepted_by)s, %(accepted_on)s, %(accepted_at)s, %(note)s, %(signature)s)
ON CONFLICT (account, name, signer) DO UPDATE SET job_name = excluded.job_name,
    external_id = excluded.external_id, accepted_by = excluded.accepted_by,
    accepted_on = excluded.accepted_on, accepted_at = excluded.accepted_at,
    note = excluded.note, signature = excluded.signature;

-- accepted_payees --
SELECT * FROM accepted_payees WHERE account = ANY(%(accounts)s)
ORDER BY accepted_at, signer;

-- ---------------------------------------------------------------- the plan, staged

-- stage_plan --
COPY plan_items (job_name, {columns}) FROM STDIN;

-- clear_plan --
DELETE FROM plan_items WHERE job_name = %(job_name)s;
DELETE FROM job_rest WHERE job_name = %(job_name)s;

-- record_plan --
-- The staged plan recorded (StateStore.record_plan): new items (and held ones the state
-- never had); resumed items whose rows changed before anything was sent; items changed
-- after their payment started a conflict (not those confirmed: they are followed to their
-- final status; nor those in doubt of looked_up, the call looked up from the state
-- alone: their money may have moved); what the row asks now of an item paid or on its way, when it is not what
-- was paid (rows that stay as they were are not touched: their updated_at tells a run of
-- unchanged inputs that nothing moved); the payee checks' findings; an item held before
-- that the plan pays now pending again; an item held by its check, or as a possible
-- duplicate, held with why (not once final, nor in doubt); then, in one pass over the job's
-- items, the state of every other item the plan wrote, read from its columns, and when each
-- item is due (a new item is inserted with both: due now when the plan pays it).
INSERT INTO items (external_id, job_name, kind, row, fingerprint, summary, payee, content,
                   outcome, error_code, error_message, created_at, updated_at, state, due_at)
SELECT external_id, job_name, %(kind)s, row, fingerprint, summary, payee, content, outcome,
       CASE action WHEN 'held' THEN 'payee' WHEN 'duplicate' THEN 'duplicate' END,
       CASE WHEN outcome = 'held' THEN why END, %(stamp)s, %(stamp)s, {moved},
       CASE WHEN {moved} = ANY(%(claimable)s)
                 AND action = ANY(%(to_pay)s) THEN {now} END
FROM (SELECT external_id, job_name, row, fingerprint, summary, payee, content, action, why,
             'new' AS step, NULL AS intent,
             CASE WHEN action IN ('held', 'duplicate') THEN 'held' ELSE 'pending' END AS outcome
      FROM plan_items
      WHERE job_name = %(job_name)s
        AND (action = 'new' OR (action IN ('held', 'duplicate') AND NOT EXISTS (
              SELECT 1 FROM items WHERE items.external_id = plan_items.external_id))))
     AS inserted
ORDER BY row;
UPDATE items SET fingerprint = plan_items.fingerprint, row = plan_items.row,
       content = plan_items.content, updated_at = %(stamp)s
FROM plan_items
WHERE plan_items.job_name = %(job_name)s AND plan_items.action = 'resume'
  AND plan_items.changed = 1 AND items.external_id = plan_items.external_id;
UPDATE items SET outcome = 'conflict', error_code = 'changed', error_message = %(conflict)s,
       updated_at = %(stamp)s
WHERE step <> 'confirmed' AND (intent IS NULL OR intent <> %(looked_up)s)
  AND external_id IN (
    SELECT external_id FROM plan_items WHERE job_name = %(job_name)s AND action = 'changed');
UPDATE items SET changed_to = CASE WHEN plan_items.changed = 1 THEN plan_items.fingerprint END,
       updated_at = %(stamp)s
FROM plan_items
WHERE plan_items.job_name = %(job_name)s AND plan_items.action IN ('settled', 'changed')
  AND items.external_id = plan_items.external_id
  AND coalesce(items.changed_to, '') <>
      coalesce(CASE WHEN plan_items.changed = 1 THEN plan_items.fingerprint END, '');
UPDATE items SET payee = plan_items.payee
FROM plan_items
WHERE plan_items.job_name = %(job_name)s AND plan_items.payee IS NOT NULL
  AND plan_items.action <> 'new' AND items.external_id = plan_items.external_id;
UPDATE items SET outcome = 'pending', error_code = NULL, error_message = NULL,
       updated_at = %(stamp)s
WHERE outcome = 'held' AND external_id IN (
    SELECT external_id FROM plan_items
    WHERE job_name = %(job_name)s AND action IN ('new', 'resume', 'in_doubt', 'retry'));
UPDATE items SET outcome = 'held',
       error_code = CASE plan_items.action WHEN 'held' THEN 'payee' ELSE 'duplicate' END,
       error_message = plan_items.why, updated_at = %(stamp)s
FROM plan_items
WHERE plan_items.job_name = %(job_name)s AND plan_items.action IN ('held', 'duplicate')
  AND items.external_id = plan_items.external_id AND items.step <> 'final'
  AND items.intent IS NULL;
UPDATE items SET state = next.state, due_at = CASE
    WHEN next.state <> ALL(%(claimable)s) THEN NULL
    WHEN items.intent IS NOT NULL THEN {now} - 1
    WHEN next.state = 'polling' OR items.external_id IN (
        SELECT external_id FROM plan_items
        WHERE job_name = %(job_name)s AND action = ANY(%(to_pay)s))
    THEN {now} END
FROM (SELECT external_id, CASE WHEN updated_at = %(stamp)s THEN {moved} ELSE state END AS state
      FROM items WHERE job_name = %(job_name)s) AS next
WHERE items.external_id = next.external_id AND items.created_at IS DISTINCT FROM %(stamp)s
  AND (items.updated_at = %(stamp)s OR items.due_at IS NOT NULL
       OR next.state = ANY(%(claimable)s));

-- staged --
SELECT * FROM plan_items
WHERE job_name = %(job_name)s AND external_id = ANY(%(ids)s);

-- staged_with --
SELECT * FROM plan_items
WHERE job_name = %(job_name)s AND action = ANY(%(actions)s)
  AND row > %(after)s
ORDER BY row LIMIT %(size)s;

-- ---------------------------------------------------------------- the queue

-- claim --
-- Up to size of the job's items due (at or before the database's clock and until) whose
-- claim is free or held by a dead worker (no heartbeat since alive), the earliest due
-- first (calls in doubt are made due before the rest), then in row order: the worker's
-- now. Rows another worker is claiming are skipped, not waited for.
WITH live AS (
    SELECT worker_id FROM workers
    WHERE job_name = %(job_name)s AND heartbeat_at > %(alive)s
), due AS (
    SELECT external_id FROM items
    WHERE job_name = %(job_name)s AND due_at <= least({now}, %(until)s)
      AND state = ANY(%(claimable)s)
      AND (claimed_by IS NULL OR claimed_by NOT IN (SELECT worker_id FROM live))
    ORDER BY due_at, row LIMIT %(size)s
    FOR UPDATE SKIP LOCKED
)
UPDATE items SET claimed_by = %(worker)s
FROM due WHERE items.external_id = due.external_id
RETURNING items.*;

-- to_start --
-- What is left to start, read in one snapshot (two workers claiming at once must not count
-- an item twice, once due and once claimed): how many such items are due (size at most),
-- and how many the other live workers claimed and have sent nothing for yet (at their
-- first step, no call in doubt).
WITH live AS (
    SELECT worker_id FROM workers
    WHERE job_name = %(job_name)s AND heartbeat_at > %(alive)s
)
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM items
            WHERE job_name = %(job_name)s AND due_at <= least({now}, %(until)s)
              AND state = ANY(%(claimable)s)
              AND (claimed_by IS NULL OR claimed_by NOT IN (SELECT worker_id FROM live))
            LIMIT %(size)s) AS due) AS due,
       (SELECT count(*) FROM items
        WHERE job_name = %(job_name)s AND step = %(fresh)s AND intent IS NULL
          AND claimed_by <> %(worker)s AND claimed_by IN (SELECT worker_id FROM live))
       AS waiting;

-- live_workers --
SELECT count(*) AS n FROM workers WHERE job_name = %(job_name)s AND heartbeat_at > %(alive)s;

-- next_due --
-- Seconds from the database's clock until the job's next item is due (at or before until;
-- NULL: none is).
SELECT min(due_at) - {now} AS wait FROM items
WHERE job_name = %(job_name)s AND due_at <= %(until)s AND state = ANY(%(claimable)s);

-- now --
SELECT {now} AS now;

-- claimants --
-- The live workers holding claims on the job's items.
SELECT DISTINCT claimed_by FROM items
WHERE job_name = %(job_name)s AND claimed_by IS NOT NULL AND claimed_by IN (
    SELECT worker_id FROM workers WHERE job_name = %(job_name)s AND heartbeat_at > %(alive)s);

-- release --
-- The worker's claims on ids given back once worked: those polling due now (their money
-- moved in this window: their first read), again due as they were (the next claim takes
-- them), the rest parked until the next plan (worked for this round).
UPDATE items SET claimed_by = NULL,
    due_at = CASE WHEN state = 'polling' THEN {now}
                  WHEN external_id = ANY(%(again)s) THEN due_at END
WHERE job_name = %(job_name)s AND claimed_by = %(worker)s AND external_id = ANY(%(ids)s);

-- polled --
-- The worker's claims on ids given back after a poll: those still polling due again delay
-- seconds from now, their polls counted.
UPDATE items SET claimed_by = NULL,
    polls = CASE WHEN state = 'polling' THEN polls + 1 ELSE polls END,
    due_at = CASE WHEN state = 'polling' THEN {now} + %(delay)s END
WHERE job_name = %(job_name)s AND claimed_by = %(worker)s AND external_id = ANY(%(ids)s);

-- give_up --
-- Every claim of the worker given back unfinished (it stops): due as they were.
UPDATE items SET claimed_by = NULL WHERE job_name = %(job_name)s AND claimed_by = %(worker)s;

-- any_live_claim --
SELECT 1 FROM items
WHERE job_name = %(job_name)s AND claimed_by IS NOT NULL AND claimed_by IN (
    SELECT worker_id FROM workers WHERE job_name = %(job_name)s AND heartbeat_at > %(alive)s)
LIMIT 1;

-- ---------------------------------------------------------------- the job's steps

-- step_digest --
SELECT digest FROM job_steps WHERE job_name = %(job_name)s AND step = %(step)s;

-- step_done --
INSERT INTO job_steps (job_name, step, digest, done_by, done_at)
VALUES (%(job_name)s, %(step)s, %(digest)s, NULL, %(done_at)s)
ON CONFLICT (job_name, step) DO UPDATE SET digest = excluded.digest, done_at = excluded.done_at;

-- step_done_at --
SELECT done_at FROM job_steps WHERE job_name = %(job_name)s AND step = %(step)s;

-- forget_step --
DELETE FROM job_steps WHERE job_name = %(job_name)s AND step = %(step)s;

-- mark_finished --
-- The job's finish for the digest, by the worker; no row back when it was recorded already.
INSERT INTO job_steps (job_name, step, digest, done_by, done_at)
VALUES (%(job_name)s, 'finish', %(digest)s, %(worker)s, %(done_at)s)
ON CONFLICT (job_name, step) DO UPDATE SET digest = excluded.digest,
    done_by = excluded.done_by, done_at = excluded.done_at
WHERE job_steps.digest IS DISTINCT FROM excluded.digest
RETURNING digest;

-- rate_slot --
-- The job's next span seconds of slots, from now (the caller's clock) at the earliest;
-- when they end.
INSERT INTO rate_slots (job_name, next_at) VALUES (%(job_name)s, %(now)s + %(span)s)
ON CONFLICT (job_name) DO UPDATE SET next_at = greatest(rate_slots.next_at, %(now)s) + %(span)s
RETURNING next_at;

-- ---------------------------------------------------------------- what is outstanding

-- outstanding --
-- The job's outstanding cost, per balance: what its items not confirmed yet are estimated
-- to cost (amount), and the fees estimated for them (fees). Its table, job_rest, keeps
-- the name migration 0008 gave it.
SELECT balance, amount, fees FROM job_rest WHERE job_name = %(job_name)s;

-- set_outstanding --
COPY job_rest (job_name, balance, amount, fees) FROM STDIN;

-- forget_outstanding --
DELETE FROM job_rest WHERE job_name = %(job_name)s;

-- reduce_outstanding --
UPDATE job_rest SET amount = %(amount)s, fees = %(fees)s
WHERE job_name = %(job_name)s AND balance = %(balance)s;

-- ---------------------------------------------------------------- runner state copy

-- dump --
SELECT {columns} FROM {table};

-- load --
COPY {table} ({columns}) FROM STDIN;

-- any_row --
SELECT 1 FROM {table} LIMIT 1;

-- reset_ids --
-- The next id of a table after the copied ones.
SELECT setval(pg_get_serial_sequence('{table}', 'id'),
              coalesce((SELECT max(id) FROM {table}), 0) + 1, false);

-- ---------------------------------------------------------------- locks

-- lock --
-- The transaction's lock on a name (a job's outstanding cost, its finish): the
-- transactions naming it run one at a time, as every SQLite writer does.
SELECT pg_advisory_xact_lock(hashtext(%(key)s));

-- lock_session --
-- A lock on a name held by one connection across transactions (a job's step).
SELECT pg_advisory_lock(hashtext(%(key)s));

-- unlock_session --
SELECT pg_advisory_unlock(hashtext(%(key)s));

-- ---------------------------------------------------------------- plans in the console
-- plan_file_heads --
-- The plan files kept, newest first, without their content (the console lists them and
-- reads each by its id where it is needed).
SELECT id, job_name, digest, '' AS content, made_at, run_id FROM plan_files
ORDER BY made_at DESC, id;

-- add_plan_signature --
-- An approval or denial given in the console: one per key, role and plan.
INSERT INTO plan_signatures (plan_id, signer, role, entry, recorded_at)
VALUES (%(plan_id)s, %(signer)s, %(role)s, %(entry)s, %(recorded_at)s) ON CONFLICT DO NOTHING;

-- plan_signatures --
SELECT * FROM plan_signatures WHERE plan_id = %(plan_id)s ORDER BY recorded_at, signer;

-- note_console_event --
INSERT INTO console_events (at, principal, key, action, plan_id, detail)
VALUES (%(at)s, %(principal)s, %(key)s, %(action)s, %(plan_id)s, %(detail)s);

-- console_events --
SELECT * FROM console_events ORDER BY id DESC LIMIT %(limit)s;

-- make_state_key --
INSERT INTO state_keys (name, value) VALUES (%(name)s, %(value)s) ON CONFLICT (name) DO NOTHING;

-- state_key --
SELECT value FROM state_keys WHERE name = %(name)s;
