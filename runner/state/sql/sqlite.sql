-- The SQLite state's statements, by name (runner.state.sql loads them; runner.state.store
-- and its parts run them through runner.state.sqlite's connector). Parameters are named
-- (:name); a list is bound as JSON text and read with json_each. A name whose SQL has
-- several statements is one change: they run in order in one transaction. Slots in braces
-- are filled from runner's own names, never from input: {changes}, the columns a change
-- sets ("column = :set_column", one per column, and, when the item moves, its state and
-- due time: runner.lifecycle.backfill and due); {moved}, an item's state read from its
-- columns; {item_columns} and {item_marks}, every column of an item; {table},
-- {columns} and {marks} of `runner state copy`.
-- The PostgreSQL twin of each is in postgresql.sql, under the same name.

-- ---------------------------------------------------------------- runs

-- start_run --
INSERT INTO runs (job_name, job_file, started_at, host, pid)
VALUES (:job_name, :job_file, :started_at, :host, :pid);

-- note_checks --
UPDATE runs SET counts = :counts WHERE id = :run_id;

-- end_run --
UPDATE runs SET ended_at = :ended_at, exit_code = :exit_code, counts = :counts,
       message = :message, digest = :digest,
       -- A run resumed (a plan applied again) whose summary says something else now: what
       -- was mailed at its earlier end is not this summary.
       mailed = CASE WHEN digest = :digest THEN mailed ELSE 0 END
WHERE id = :run_id;

-- note_exit --
UPDATE runs SET exit_code = :exit_code WHERE id = :run_id;

-- stop_run --
-- A run stopped by an error: its end, code and why; its counts stay the checks' own.
UPDATE runs SET ended_at = :ended_at, exit_code = :exit_code, message = :message
WHERE id = :run_id AND ended_at IS NULL;

-- note_inputs --
UPDATE runs SET inputs = :digest WHERE id = :run_id;

-- note_lines --
UPDATE runs SET lines = :lines WHERE id = :run_id;

-- note_duplicates_allowed --
UPDATE runs SET allow_duplicates = 1 WHERE id = :run_id;

-- note_mailed --
UPDATE runs SET mailed = 1 WHERE id = :run_id;

-- work_left --
-- How many items the job has, how many a run would still work on, the latest change.
SELECT count(*) AS all_items,
       coalesce(sum(CASE WHEN step <> 'final' AND outcome <> 'conflict' THEN 1 ELSE 0 END), 0)
           AS open_items,
       max(updated_at) AS last_update
FROM items WHERE job_name = :job_name;

-- runs --
SELECT id, started_at, ended_at, exit_code, counts, message, digest, mailed, inputs, lines,
       allow_duplicates
FROM runs WHERE job_name = :job_name ORDER BY id;

-- run_calls --
-- The calls each run of the job sent, by step.
SELECT a.run_id, a.step, count(*) AS n
FROM attempts a JOIN runs r ON r.id = a.run_id
WHERE r.job_name = :job_name GROUP BY a.run_id, a.step;

-- run_approvals --
SELECT a.* FROM approvals a JOIN runs r ON r.id = a.run_id WHERE r.job_name = :job_name;

-- latest_runs --
-- The job's runs, those that ended first, the latest first.
SELECT id, started_at, ended_at, exit_code, counts, message, digest, mailed, inputs, lines,
       allow_duplicates
FROM runs WHERE job_name = :job_name ORDER BY ended_at IS NULL, ended_at DESC, id DESC;

-- approval --
SELECT * FROM approvals WHERE run_id = :run_id;

-- note_approval --
INSERT INTO approvals (run_id, plan_sha256, planned_by, planned_on, planned_at, approved_by,
                       applied_by, applied_on, approved_at, planner_key, signers)
VALUES (:run_id, :plan_sha256, :planned_by, :planned_on, :planned_at, :approved_by,
        :applied_by, :applied_on, :approved_at, :planner_key, :signers)
ON CONFLICT (run_id) DO UPDATE SET plan_sha256 = excluded.plan_sha256,
    planned_by = excluded.planned_by, planned_on = excluded.planned_on,
    planned_at = excluded.planned_at, approved_by = excluded.approved_by,
    applied_by = excluded.applied_by, applied_on = excluded.applied_on,
    approved_at = excluded.approved_at, planner_key = excluded.planner_key,
    signers = excluded.signers;

-- reopen_run --
-- The run's end cleared, this process its own; no row back while a live worker works it.
UPDATE runs SET ended_at = NULL, exit_code = NULL, host = :host, pid = :pid
WHERE id = :run_id
  AND NOT EXISTS (SELECT 1 FROM workers WHERE run_id = :run_id AND heartbeat_at > :alive)
RETURNING id;

-- note_plan_file --
INSERT INTO plan_files (id, job_name, digest, content, made_at, run_id)
VALUES (:id, :job_name, :digest, :content, :made_at, :run_id) ON CONFLICT (id) DO NOTHING;

-- plan_file --
SELECT * FROM plan_files WHERE id = :id;

-- note_plan_applied --
UPDATE plan_files SET run_id = :run_id WHERE id = :id;

-- forget_run --
-- A run refused before it sent anything (an apply whose plan file was refused): no run.
DELETE FROM runs WHERE id = :run_id
  AND NOT EXISTS (SELECT 1 FROM attempts WHERE run_id = :run_id);

-- ---------------------------------------------------------------- the rules of a batch

-- remember_rules --
-- A batch planned under four eyes stays under it: its first rules are kept, the approvals
-- only ever raised.
INSERT INTO batch_rules (job_name, four_eyes, approvals, payee_approvals, signers, plan_id,
                         recorded_at)
VALUES (:job_name, 1, :approvals, :payee_approvals, :signers, :plan_id,
        :recorded_at)
ON CONFLICT (job_name) DO UPDATE SET four_eyes = 1,
    approvals = max(batch_rules.approvals, excluded.approvals),
    payee_approvals = max(batch_rules.payee_approvals, excluded.payee_approvals);

-- batch_rules --
SELECT * FROM batch_rules WHERE job_name = :job_name;

-- ---------------------------------------------------------------- the workers

-- workers --
-- The job's workers, each with its heartbeat (this host's clock) and its holder, the
-- latest heartbeat first.
SELECT * FROM workers WHERE job_name = :job_name ORDER BY heartbeat_at DESC;

-- all_workers --
SELECT * FROM workers;

-- enlist --
-- A worker of the job, alone (rule 6): the job's earlier workers are dead, and their
-- claims void.
DELETE FROM workers WHERE job_name = :job_name;
UPDATE items SET claimed_by = NULL WHERE job_name = :job_name AND claimed_by IS NOT NULL;
INSERT INTO workers (worker_id, job_name, run_id, host, pid, boot_id, pid_ns, locked,
                     heartbeat_at)
VALUES (:worker_id, :job_name, 0, :host, :pid, :boot_id, :pid_ns, :locked, :now);

-- worker_started --
-- The run a worker works, once it has begun (the worker enlists as it starts).
UPDATE workers SET run_id = :run_id, heartbeat_at = :now WHERE worker_id = :worker_id;

-- heartbeat --
UPDATE workers SET heartbeat_at = :now WHERE worker_id = :worker_id;

-- forget_worker --
-- A worker gone (it left, or its process is known dead): its claims are anyone's at once.
UPDATE items SET claimed_by = NULL WHERE job_name = :job_name AND claimed_by = :worker_id;
DELETE FROM workers WHERE worker_id = :worker_id;

-- ---------------------------------------------------------------- items

-- item --
SELECT * FROM items WHERE external_id = :external_id;

-- items --
SELECT * FROM items WHERE job_name = :job_name ORDER BY row;

-- item_page --
-- The next page of the job's items after (:row, :after) in row order, each with when the
-- provider last answered its :answered call.
SELECT i.*, (SELECT max(a.finished_at) FROM attempts a
             WHERE a.external_id = i.external_id AND a.step = :answered AND a.result = 'ok')
           AS answered_at
FROM items i
WHERE i.job_name = :job_name AND (i.row > :row OR (i.row = :row AND i.external_id > :after))
ORDER BY i.row, i.external_id LIMIT :size;

-- owners --
SELECT external_id, job_name FROM items
WHERE external_id IN (SELECT value FROM json_each(:ids));

-- items_by_id --
SELECT * FROM items WHERE external_id IN (SELECT value FROM json_each(:ids));

-- insert_items --
INSERT INTO items ({item_columns}, state) VALUES ({item_marks}, ?);

-- update_item --
UPDATE items SET {changes}, updated_at = :updated_at WHERE external_id = :external_id;

-- start_retry --
INSERT INTO retries (external_id, job_name, run_id, lineage, ref, previous_ref,
                     previous_status, previous_code, previous_message, changed, at)
VALUES (:external_id, :job_name, :run_id, :lineage, :ref, :previous_ref, :previous_status,
        :previous_code, :previous_message, :changed, :updated_at);
UPDATE items SET {changes}, due_at = {now}, updated_at = :updated_at
WHERE external_id = :external_id;

-- retries --
SELECT * FROM retries WHERE job_name = :job_name ORDER BY id;

-- operations_sent --
-- Items of the kinds whose call reached the provider or may have (in doubt, settled,
-- unknown), of one order or of every one.
SELECT * FROM items
WHERE kind IN (SELECT value FROM json_each(:kinds)) AND provider_ref IS NOT NULL
  AND (intent IS NOT NULL OR outcome IN ('settled', 'unknown'))
  AND (:order_id IS NULL OR provider_ref = :order_id);

-- resolved --
-- What a person found, with its attempt row.
INSERT INTO attempts (external_id, step, started_at, finished_at, result, request, message)
VALUES (:external_id, :step, :updated_at, :updated_at, :result, :request, :note);
UPDATE items SET {changes}, updated_at = :updated_at WHERE external_id = :external_id;

-- found --
-- What reconcile found, only onto the item as it was read.
UPDATE items SET {changes}, updated_at = :updated_at
WHERE external_id = :external_id AND lineage = :lineage AND attempt = :attempt
  AND step = :step AND outcome = :outcome
RETURNING external_id;

-- found_attempt --
INSERT INTO attempts (external_id, step, request, started_at, finished_at, result, message)
VALUES (:external_id, 'reconcile', :request, :updated_at, :updated_at, :result, :note);

-- same_payments --
-- The first two items of the job paying each content, in row order (those failed with
-- nothing paid, and those held, left out).
SELECT content, external_id, row, outcome FROM (
    SELECT content, external_id, row, outcome,
           row_number() OVER (PARTITION BY content ORDER BY row) AS n
    FROM items
    WHERE job_name = :job_name AND content IN (SELECT value FROM json_each(:contents))
      AND outcome NOT IN ('failed', 'held')) AS ranked
WHERE n <= 2 ORDER BY row;

-- ---------------------------------------------------------------- attempts (rule 2)

-- begin_attempt --
-- The intent, committed before the call.
INSERT INTO attempts (run_id, external_id, step, request, started_at)
VALUES (:run_id, :external_id, :step, :request, :updated_at);
UPDATE items SET {changes}, updated_at = :updated_at WHERE external_id = :external_id;

-- begin_attempt_answered --
-- The intent, with the previous call's answer and what it made of the item.
INSERT INTO attempts (run_id, external_id, step, request, started_at)
VALUES (:run_id, :external_id, :step, :request, :updated_at);
UPDATE attempts SET finished_at = :updated_at, result = 'ok', http_status = 200
WHERE id = :answered;
UPDATE items SET {changes}, updated_at = :updated_at WHERE external_id = :external_id;

-- end_attempt --
UPDATE attempts SET finished_at = :updated_at, result = :result, http_status = :http_status,
       code = :code, message = :message
WHERE id = :attempt_id;
UPDATE items SET {changes}, updated_at = :updated_at WHERE external_id = :external_id;

-- attempts --
SELECT * FROM attempts WHERE external_id = :external_id ORDER BY id;

-- ---------------------------------------------------------------- payee checks

-- payee_checks --
SELECT * FROM payee_checks WHERE account IN (SELECT value FROM json_each(:accounts));

-- keep_payee_check --
INSERT INTO payee_checks (account, service, payer, identifier, account_status, holder,
                          checked_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (account) DO UPDATE SET service = excluded.service, payer = excluded.payer,
    identifier = excluded.identifier, account_status = excluded.account_status,
    holder = excluded.holder, checked_at = excluded.checked_at;

-- accept_payee --
-- One person's acceptance of a payee (its account and name), replacing their earlier one.
INSERT INTO accepted_payees (account, name, signer, job_name, external_id, accepted_by,
                             accepted_on, accepted_at, note, signature)
VALUES (:account, :name, :signer, :job_name, :external_id, :accepted_by, :accepted_on,
        :accepted_at, :note, :signature)
ON CONFLICT (account, name, signer) DO UPDATE SET job_name = excluded.job_name,
    external_id = excluded.external_id, accepted_by = excluded.accepted_by,
    accepted_on = excluded.accepted_on, accepted_at = excluded.accepted_at,
    note = excluded.note, signature = excluded.signature;

-- accepted_payees --
SELECT * FROM accepted_payees WHERE account IN (SELECT value FROM json_each(:accounts))
ORDER BY accepted_at, signer;

-- ---------------------------------------------------------------- the plan, staged

-- stage_plan --
INSERT INTO plan_items (job_name, {columns}) VALUES (?, {marks});

-- clear_plan --
DELETE FROM plan_items WHERE job_name = :job_name;
DELETE FROM job_rest WHERE job_name = :job_name;

-- record_plan --
-- The staged plan recorded (StateStore.record_plan): new items (and held ones the state
-- never had); resumed items whose rows changed before anything was sent; items changed
-- after their payment started a conflict (not those confirmed: they are followed to their
-- final status; nor those in doubt of :looked_up, the call looked up from the state
-- alone: their money may have moved); what the row asks now of an item paid or on its way, when it is not what
-- was paid (rows that stay as they were are not touched: their updated_at tells a run of
-- unchanged inputs that nothing moved); the payee checks' findings; an item held before
-- that the plan pays now pending again; an item held by its check, or as a possible
-- duplicate, held with why (not once final, nor in doubt); the state of every other item the
-- plan wrote, read from its columns (a new item is inserted with its state and when it is
-- due); and the queue: due now what the plan pays and what is polling, a call in doubt before
-- them (looked up first, rule 3), nothing else.
INSERT INTO items (external_id, job_name, kind, row, fingerprint, summary, payee, content,
                   outcome, error_code, error_message, created_at, updated_at, state, due_at)
SELECT external_id, job_name, :kind, row, fingerprint, summary, payee, content, outcome,
       CASE action WHEN 'held' THEN 'payee' WHEN 'duplicate' THEN 'duplicate' END,
       CASE WHEN outcome = 'held' THEN why END, :stamp, :stamp, {moved},
       CASE WHEN {moved} IN (SELECT value FROM json_each(:claimable))
                 AND action IN (SELECT value FROM json_each(:to_pay)) THEN {now} END
FROM (SELECT external_id, job_name, row, fingerprint, summary, payee, content, action, why,
             'new' AS step, NULL AS intent,
             CASE WHEN action IN ('held', 'duplicate') THEN 'held' ELSE 'pending' END AS outcome
      FROM plan_items
      WHERE job_name = :job_name
        AND (action = 'new' OR (action IN ('held', 'duplicate') AND NOT EXISTS (
              SELECT 1 FROM items WHERE items.external_id = plan_items.external_id))))
     AS inserted
ORDER BY row;
UPDATE items SET fingerprint = plan_items.fingerprint, row = plan_items.row,
       content = plan_items.content, updated_at = :stamp
FROM plan_items
WHERE plan_items.job_name = :job_name AND plan_items.action = 'resume'
  AND plan_items.changed = 1 AND items.external_id = plan_items.external_id;
UPDATE items SET outcome = 'conflict', error_code = 'changed', error_message = :conflict,
       updated_at = :stamp
WHERE step <> 'confirmed' AND (intent IS NULL OR intent <> :looked_up) AND external_id IN (
    SELECT external_id FROM plan_items WHERE job_name = :job_name AND action = 'changed');
UPDATE items SET changed_to = CASE WHEN plan_items.changed = 1 THEN plan_items.fingerprint END,
       updated_at = :stamp
FROM plan_items
WHERE plan_items.job_name = :job_name AND plan_items.action IN ('settled', 'changed')
  AND items.external_id = plan_items.external_id
  AND coalesce(items.changed_to, '') <>
      coalesce(CASE WHEN plan_items.changed = 1 THEN plan_items.fingerprint END, '');
UPDATE items SET payee = plan_items.payee
FROM plan_items
WHERE plan_items.job_name = :job_name AND plan_items.payee IS NOT NULL
  AND plan_items.action <> 'new' AND items.external_id = plan_items.external_id;
UPDATE items SET outcome = 'pending', error_code = NULL, error_message = NULL,
       updated_at = :stamp
WHERE outcome = 'held' AND external_id IN (
    SELECT external_id FROM plan_items
    WHERE job_name = :job_name AND action IN ('new', 'resume', 'in_doubt', 'retry'));
UPDATE items SET outcome = 'held',
       error_code = CASE plan_items.action WHEN 'held' THEN 'payee' ELSE 'duplicate' END,
       error_message = plan_items.why, updated_at = :stamp
FROM plan_items
WHERE plan_items.job_name = :job_name AND plan_items.action IN ('held', 'duplicate')
  AND items.external_id = plan_items.external_id AND items.step <> 'final'
  AND items.intent IS NULL;
UPDATE items SET state = next.state, due_at = CASE
    WHEN next.state NOT IN (SELECT value FROM json_each(:claimable)) THEN NULL
    WHEN items.intent IS NOT NULL THEN {now} - 1
    WHEN next.state = 'polling' OR items.external_id IN (
        SELECT external_id FROM plan_items
        WHERE job_name = :job_name AND action IN (SELECT value FROM json_each(:to_pay)))
    THEN {now} END
FROM (SELECT external_id, CASE WHEN updated_at = :stamp THEN {moved} ELSE state END AS state
      FROM items WHERE job_name = :job_name) AS next
WHERE items.external_id = next.external_id AND items.created_at IS NOT :stamp
  AND (items.updated_at = :stamp OR items.due_at IS NOT NULL
       OR next.state IN (SELECT value FROM json_each(:claimable)));

-- staged --
SELECT * FROM plan_items
WHERE job_name = :job_name AND external_id IN (SELECT value FROM json_each(:ids));

-- staged_with --
SELECT * FROM plan_items
WHERE job_name = :job_name AND action IN (SELECT value FROM json_each(:actions))
  AND row > :after
ORDER BY row LIMIT :size;

-- ---------------------------------------------------------------- the queue

-- claim --
-- Up to :size of the job's items due (at or before the database's clock and :until) whose
-- claim is free or held by a dead worker (no heartbeat since :alive), the earliest due
-- first (calls in doubt are made due before the rest), then in row order: :worker's now.
UPDATE items SET claimed_by = :worker
WHERE external_id IN (
    SELECT external_id FROM items
    WHERE job_name = :job_name AND due_at <= min({now}, :until)
      AND state IN (SELECT value FROM json_each(:claimable))
      AND (claimed_by IS NULL OR claimed_by NOT IN (
            SELECT worker_id FROM workers WHERE job_name = :job_name AND heartbeat_at > :alive))
    ORDER BY due_at, row LIMIT :size)
RETURNING *;

-- to_start --
-- What is left to start, read in one snapshot (two workers claiming at once must not count
-- an item twice, once due and once claimed): how many such items are due (size at most),
-- and how many the other live workers claimed and have sent nothing for yet (at their
-- first step, no call in doubt).
WITH live AS (
    SELECT worker_id FROM workers
    WHERE job_name = :job_name AND heartbeat_at > :alive
)
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM items
            WHERE job_name = :job_name AND due_at <= min({now}, :until)
              AND state IN (SELECT value FROM json_each(:claimable))
              AND (claimed_by IS NULL OR claimed_by NOT IN (SELECT worker_id FROM live))
            LIMIT :size) AS due) AS due,
       (SELECT count(*) FROM items
        WHERE job_name = :job_name AND step = :fresh AND intent IS NULL
          AND claimed_by <> :worker AND claimed_by IN (SELECT worker_id FROM live))
       AS waiting;

-- live_workers --
SELECT count(*) AS n FROM workers WHERE job_name = :job_name AND heartbeat_at > :alive;

-- next_due --
-- Seconds from the database's clock until the job's next item is due (at or before
-- :until; NULL: none is).
SELECT min(due_at) - {now} AS wait FROM items
WHERE job_name = :job_name AND due_at <= :until
  AND state IN (SELECT value FROM json_each(:claimable));

-- now --
SELECT {now} AS now;

-- claimants --
-- The live workers holding claims on the job's items.
SELECT DISTINCT claimed_by FROM items
WHERE job_name = :job_name AND claimed_by IS NOT NULL AND claimed_by IN (
    SELECT worker_id FROM workers WHERE job_name = :job_name AND heartbeat_at > :alive);

-- release --
-- The worker's claims on :ids given back once worked: those polling due now (their money
-- moved in this window: their first read), :again due as they were (the next claim takes
-- them), the rest parked until the next plan (worked for this round).
UPDATE items SET claimed_by = NULL,
    due_at = CASE WHEN state = 'polling' THEN {now}
                  WHEN external_id IN (SELECT value FROM json_each(:again)) THEN due_at END
WHERE job_name = :job_name AND claimed_by = :worker
  AND external_id IN (SELECT value FROM json_each(:ids));

-- polled --
-- The worker's claims on :ids given back after a poll: those still polling due again
-- :delay seconds from now, their polls counted.
UPDATE items SET claimed_by = NULL,
    polls = CASE WHEN state = 'polling' THEN polls + 1 ELSE polls END,
    due_at = CASE WHEN state = 'polling' THEN {now} + :delay END
WHERE job_name = :job_name AND claimed_by = :worker
  AND external_id IN (SELECT value FROM json_each(:ids));

-- give_up --
-- Every claim of the worker given back unfinished (it stops): due as they were.
UPDATE items SET claimed_by = NULL WHERE job_name = :job_name AND claimed_by = :worker;

-- any_live_claim --
SELECT 1 FROM items
WHERE job_name = :job_name AND claimed_by IS NOT NULL AND claimed_by IN (
    SELECT worker_id FROM workers WHERE job_name = :job_name AND heartbeat_at > :alive)
LIMIT 1;

-- ---------------------------------------------------------------- the job's steps

-- step_digest --
SELECT digest FROM job_steps WHERE job_name = :job_name AND step = :step;

-- step_done --
INSERT INTO job_steps (job_name, step, digest, done_by, done_at)
VALUES (:job_name, :step, :digest, NULL, :done_at)
ON CONFLICT (job_name, step) DO UPDATE SET digest = excluded.digest, done_at = excluded.done_at;

-- step_done_at --
SELECT done_at FROM job_steps WHERE job_name = :job_name AND step = :step;

-- forget_step --
DELETE FROM job_steps WHERE job_name = :job_name AND step = :step;

-- mark_finished --
-- The job's finish for :digest, by :worker; no row back when it was recorded already.
INSERT INTO job_steps (job_name, step, digest, done_by, done_at)
VALUES (:job_name, 'finish', :digest, :worker, :done_at)
ON CONFLICT (job_name, step) DO UPDATE SET digest = excluded.digest,
    done_by = excluded.done_by, done_at = excluded.done_at
WHERE job_steps.digest IS NOT excluded.digest
RETURNING digest;

-- rate_slot --
-- The job's next :span seconds of slots, from :now at the earliest; when they end.
INSERT INTO rate_slots (job_name, next_at) VALUES (:job_name, :now + :span)
ON CONFLICT (job_name) DO UPDATE SET next_at = max(rate_slots.next_at, :now) + :span
RETURNING next_at;

-- ---------------------------------------------------------------- what is outstanding

-- outstanding --
-- The job's outstanding cost, per balance: what its items not confirmed yet are estimated
-- to cost (amount), and the fees estimated for them (fees). Its table, job_rest, keeps
-- the name migration 0008 gave it.
SELECT balance, amount, fees FROM job_rest WHERE job_name = :job_name;

-- set_outstanding --
INSERT INTO job_rest (job_name, balance, amount, fees) VALUES (?, ?, ?, ?);

-- forget_outstanding --
DELETE FROM job_rest WHERE job_name = :job_name;

-- reduce_outstanding --
UPDATE job_rest SET amount = :amount, fees = :fees
WHERE job_name = :job_name AND balance = :balance;

-- ---------------------------------------------------------------- runner state copy

-- dump --
SELECT {columns} FROM {table};

-- load --
INSERT INTO {table} ({columns}) VALUES ({marks});

-- any_row --
SELECT 1 FROM {table} LIMIT 1;

-- ---------------------------------------------------------------- plans in the console
-- plan_file_heads --
-- The plan files kept, newest first, without their content (the console lists them and
-- reads each by its id where it is needed).
SELECT id, job_name, digest, '' AS content, made_at, run_id FROM plan_files
ORDER BY made_at DESC, id;

-- add_plan_signature --
-- An approval or denial given in the console: one per key, role and plan.
INSERT INTO plan_signatures (plan_id, signer, role, entry, recorded_at)
VALUES (:plan_id, :signer, :role, :entry, :recorded_at) ON CONFLICT DO NOTHING;

-- plan_signatures --
SELECT * FROM plan_signatures WHERE plan_id = :plan_id ORDER BY recorded_at, signer;

-- note_console_event --
INSERT INTO console_events (at, principal, key, action, plan_id, detail)
VALUES (:at, :principal, :key, :action, :plan_id, :detail);

-- console_events --
SELECT * FROM console_events ORDER BY id DESC LIMIT :limit;

-- make_state_key --
INSERT INTO state_keys (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING;

-- state_key --
SELECT value FROM state_keys WHERE name = :name;
