"""The timing rules dispatch relies on, in one place.

- A job due within DIRECT_WINDOW of its submission is sent to SQS by the submit Lambda itself,
  with DelaySeconds (SQS allows at most 15 minutes).
- Every other job is written `pending` with a due time beyond now + DIRECT_WINDOW. Sweepers run
  every minute and claim jobs due up to now + SWEEP_LOOKAHEAD, then advance a per-shard cursor
  to that frontier.
- Because DIRECT_WINDOW - SWEEP_LOOKAHEAD (60 s) exceeds the longest a submit can take between
  reading the clock and writing the item (the submit Lambda times out after 10 s), a pending job
  is never written behind a cursor, so no sweep can pass over it.
- A sweeper claim is a lease: if the claimer dies before it has sent the job and advanced the
  cursor, the job is taken over once CLAIM_LEASE has passed (longer than a sweeper can live).
- Some paths make a job pending again, or write one, within DIRECT_WINDOW: resuming a paused
  job or schedule, a new schedule's first occurrences, a paused queue's due-soon jobs. A sweep
  may already have passed them, so those paths send them themselves (services.release: the job
  is made `direct` first, so no sweeper claims it too), or, for a paused queue, record them for
  the catch-up its resume runs (sundial.store.queue_states).

THE OWNER RULE (the write side of the cursor rule). A write never leaves a dispatchable job
below its shard's cursor unless the same operation owns sending it. Where it is enforced:
- JobStore.put_new / put_if_absent refuse (UnsafeWrite, before writing anything) a new pending
  job due within DIRECT_WINDOW that is not `direct`. Every path that writes new jobs (submit,
  batch, idempotent repeat, DAG roots, retry timers) goes through them, so a new feature that
  forgets the rule fails its first test instead of losing jobs.
- A due-soon job of a paused queue is not direct (the queue's resume sends it): it is written
  (JobService.write_new) or resumed (JobService.resume) in ONE transaction with a check that the
  queue is still paused (QueueStateStore.hold_with). The queue's resume flips `paused` first and
  reads its catch-up range and its `held` set after, so either the resume sees the job or the
  transaction fails and the writer, seeing the queue running, makes the job direct and sends it.
  A resumed job may be due before the catch-up range, so it is recorded in `held` by the same
  transaction; a new job is due no earlier than its submit, inside the range. (Before: submit
  read "paused" and wrote a plain pending job; a resume landing between the two lost it. A job
  resume wrote the job and then `held`; a crash between them lost it.)
- A schedule and its first occurrence are written in one transaction (ScheduleStore.create), so
  no sweep finds the occurrence without its schedule (it would drop it); a first occurrence due
  within DIRECT_WINDOW is direct and the create sends it; an idempotent retry of a create that
  died finishes the send once SUBMIT_IN_FLIGHT has passed.
- The exception, owned by the writer: a schedule's successor (OccurrenceChain.advance, through
  put_or_existing) is written by the sweep or API call that is dispatching its predecessor, and
  that caller sends it when it is due within its range (ShardSweep._follow, Releaser.release).

Other write sequences and what they interleave with:
- Authorization (sundial.api.authorization) adds no write. A route addressed by id may read the
  item first to learn its queue, then the route does what it always did (a DAG node's cancel
  also reads its DAG's nodes, for the queues its cascade may reach). A job's, DAG node's or
  schedule's queue is written once, when the item is created, and never changed, nor is a DAG's
  shape, so whatever runs between the read and the route's own conditional writes cannot make
  the check stale; a 403 is raised before the route runs, so it writes nothing.
- A queue's catch-up (a resume, or a sweeper finishing one) takes each held job (`direct`, a
  conditional write) before sending it. Two overlapping catch-ups: the second leaves a job the
  first took less than CATCH_UP_STALE ago (services.queues) and keeps it on the `held` list, so it
  is sent once; only a job sent, gone or finished is struck off. Likewise a shard of the catch-up
  range is struck off only when none of its jobs is left taken by another caller that has not
  sent it (Released.busy): that caller may have died (a resume that crashed after its take), and
  the next pass takes the job once the take is SUBMIT_IN_FLIGHT old.
- A call that took due-soon jobs to send them itself (a job resume, a schedule create or
  resume) and died before sending leaves them `direct` below the cursor: no sweep takes them.
  The client's repeat of that call (the API asks for it: no answer, 503) finishes the work once
  SUBMIT_IN_FLIGHT has passed: a job resume resumes a stale direct job again; a schedule's create
  or resume sends every fired occurrence still pending in the window (ScheduleService._unsent).
- Parking a paused schedule's occurrence (a sweep reaching it, a release, or the schedule's pause
  itself) is one transaction with a check that the schedule is still paused (ScheduleStore.park).
  A resume that lands first makes the park fail; the parker decides again (the occurrence fires)
  and a pause answers 409 "resumed while this pause ran". So a resumed schedule never keeps a
  parked occurrence, whatever the order of pause, resume and sweep.
  A pause parks all its occurrences (those sent for a time still ahead, and the waiting head)
  in as few transactions as TransactWriteItems takes: the check and up to 99 parks in each
  (ScheduleStore.park_all; one transaction for the densest schedule, every 10 s: at most 91
  occurrences in 15 minutes; it was one per occurrence). The rule holds per transaction:
  - A resume landing between two of them: the earlier ones are written and the later ones fail
    their check (409). The resume flips the state first and reads the occurrences after, so it
    sees every park written before its flip and releases it; none is written after it.
  - An occurrence that stops being parkable while the pause runs (a consumer took it, a cancel,
    a sweep's own park) fails its entry: the whole transaction is cancelled, and written again
    without it (it is left as the other write made it, as a lone park that failed would have
    left it). Each round leaves one out, so the rounds end. The pause parks only what it read
    as parkable, so such a round is rare.
  - A crash between two transactions leaves the earlier parks and a paused schedule: what a
    crash after some of the one-by-one parks left. Pausing again repeats the work.
- An update of a schedule (PATCH, ScheduleService.update) replaces the chain's head H, the one
  occurrence no run record decides yet, in ONE transaction (ScheduleStore.revise): the schedule's
  new settings, conditional on the revision read and on not being deleted; H's run record,
  put-if-absent, outcome `replaced`, naming the new first occurrence N and its revision; H
  cancelled and `chained`, conditional on pending, paused or cancelled (or, if a sweep decided
  H's predecessor and has not written H yet, H put cancelled, if absent); N put, if absent.
  "Decided" means a run record exists: every sender writes it before it claims or sends an
  occurrence (services.chain), so the record is where a sweep or a release and an update meet.
  If a sweep decides H first, the transaction fails and the update reads again: H keeps its
  settings and runs, and the update replaces H's successor instead (if it is not written yet,
  the sweep's later put finds the cancelled item and adds nothing). If the update commits
  first, a sweep that read H before (pending) decides it after: its record put finds
  `replaced` (it cancels H, a no-op) and its successor is N, already written; a sweep that read
  the old schedule writes nothing of it. So after a 200, an occurrence of the old settings
  runs only if it was decided before the update. Each update starts a new revision whose
  occurrences have keys (and run records) of their own, so an old occurrence and a new one
  never share an item, even at the same time. N is after the newest decided occurrence (no
  duplicate run of a time) and, unless H was overdue, not before now; the head is found from
  the newest decided record, or the schedule's `first_at` (N) once an update came after it.
  N due within DIRECT_WINDOW is direct and the update sends it (services.release, which decides
  it through the chain: a paused schedule parks it, a paused queue holds it); a crash after the
  commit leaves it direct: the client's repeat of the update changes nothing (same settings)
  and sends it once SUBMIT_IN_FLIGHT has passed (a conditional take: two repeats send it once),
  answering 409 "retry shortly" while it may still be on its way. Two updates: one commits,
  the other's revision condition fails and it reads again and applies its fields on top (or
  409 after a few rounds). A delete commits first (the update's condition fails: 409 deleted)
  or after (the delete reads the head after its own write and cancels N). A pause or resume
  does not conflict on the schedule item; on the head they are serialised by its conditions:
  a park before the update is replaced with it; N then meets the paused schedule (the sweep or
  the update's release parks it); a resume that released H first decided it (the update moves
  on), one that finds H cancelled finds N as the head.
- A schedule's resume moves the chain on from an occurrence cancelled while parked (a client
  skipping one run): no sweep comes back to it, its time is behind the cursor.
- A queue's schedule listing (GET /schedules?queue=, ScheduleStore: one index item per live
  schedule at "schedules#<queue>"). The index item is written in the transaction that writes
  the schedule and its first occurrence, and deleted in the transaction that marks the schedule
  deleted (conditional on its state, as the delete always was), so at every instant a schedule
  is listed exactly when it exists and is not deleted: a crash before either transaction left
  nothing, after it left both. It holds the id only: an update, a pause, a resume and every
  occurrence write nothing to it, so it interleaves with them without any rule (the listing
  reads the schedule items themselves, with a consistent BatchGetItem, for what it shows). Two
  deletes: the second finds the schedule deleted and writes nothing; a create repeated with its
  idempotency key fails its put and writes no second index item. The one-off backfill
  (sundial.backfill) writes an index item in a transaction with a check that the schedule is
  not deleted, put-if-absent: a delete landing before it makes it fail (never listed), one
  landing after it removes the item it wrote.
- A queue's DAG listing (GET /dags?queue=, store.dag_listing): a DAG's entries (one per queue
  it uses) are written by its submit before any node, with a plain put of a fixed key (a repeat
  writes the same item). A crash after them and before the nodes leaves entries with no nodes,
  which a listing passes over (it reads each DAG's nodes) and which expire; a crash after some
  nodes leaves a DAG that GET /dags/{id} shows too, and the listing shows it the same. No node
  write (release, count, cancel, pause, resume) touches an entry, and a DAG is never deleted
  (its entries expire after its nodes), so the listing interleaves with the DAG's progress
  without any rule. The backfill puts an entry only if absent.
- A submission window (issue 16: a queue's max_submissions_per_second, services.admission) is
  counted by one conditional UpdateItem on its own item ("quota#<queue>#<lane>",
  "window#<second>"), before the request writes any idempotency record or job, and it touches no
  job item, cursor or queue state, so it interleaves with nothing the cursor and owner rules
  rely on. A refused count writes nothing and the request ends there (429): no job exists to
  lose. A count followed by a crash (or by a 503 later in the request) only uses up quota: the
  rest of the request wrote what it would have written with no quota, so the existing rules
  cover it, and the client's repeat is an ordinary submit, counted again (its idempotency key
  returns the one job if the first attempt wrote it). Two requests racing for the last room in a
  window are serialised on the counter item by DynamoDB: one is counted, the other refused
  whole, never both over the limit. The window comes from the clock (now // 1 s) and only ever
  selects an item: a window a clock step skipped is simply never counted in.
  The other calls that make jobs appear on a queue count the same way, each before its first
  write (issue 25, item 8; what each counts: services.admission): a schedule's create (before
  its create transaction), update (before the first round's transaction; a round lost to a race
  reads again and is not counted again) and resume (from a read of its paused occurrences
  before the write that marks it resuming; its work reads them again after that write, so a
  sweep parking the head in between is sent all the same, and counted the same); a move and a
  run-now (after the job is read and found movable, before its payload's S3 put and its
  transaction); a retry by id (before its chain step and requeue; a job found in a state that
  cannot be retried is a 409, uncounted) and so each job of a dead-letter replay (the replay
  stops at a refusal: the letters after it are kept, untouched). A refusal writes nothing, and a
  crash after a count only uses quota, as for submit: the client's repeat is counted again
  unless it finds the first call's work done (a schedule's repeat create, or an update that
  changes nothing, counts nothing). More jobs at once than a second admits (a schedule's
  occurrences within the direct window) are counted over the following seconds: one consistent
  Query of the lane's windows from now on, then ONE TransactWriteItems adding to each, each
  conditional on its room as for a single window. A take or another spread landing on one of
  those windows between the read and the transaction makes a condition fail (or the
  transaction conflict): nothing is written and the call is a 429; so no window ever passes its
  limit and a spread is all or nothing. Only a spread writes a window ahead of the clock, and
  at most MAX_SPREAD_S ahead, so the read covers every window that can hold a count.
- The consumer takes the attempt (queued -> running, conditional on the attempt) before it calls
  the function, and a cancel is conditional on the job not running. The two writes are
  serialised on the job's item: a cancel that answered 200 came first, and the take then fails
  (the function never runs); a take that came first makes the cancel a 409 (running).
- THE ATTEMPT'S HOLDER (sundial.store.attempts). The take records one holder (a random token)
  and until when it is provably alive (a Lambda's deadline, a worker's lease). Two deliveries
  of one attempt (two messages, or one delivered again) race on the take: one sets the holder,
  the other's condition fails (it is turned away as busy); a take-over needs the holder's
  lease past by CLOCK_SKEW_MS, and only the holder ends or extends the attempt, so a holder
  that lost its attempt (its lease ran out) writes nothing. A redrive's mark_dead is bound to
  the same rule (a live holder's attempt is never killed by a second message's letter), and to
  the letter's revision: a move or a retry by id raises the revision, so what was sent before
  them is stale for the fence, the take and the redrive alike.

MOVES (PATCH /jobs/{id}, POST /jobs/{id}/run-now; sundial.services.moves). A job waiting for its
first attempt (pending, paused, or queued with attempts = 0) is changed by ONE TransactWriteItems
built from the job as read (JobStore.move_writes): put the job at its new key (its new due time;
same shard and ULID), turn its origin (the key its id names) into a pointer to it or update that
pointer, and delete its previous item; each entry is conditional on what it replaces being as
read (status, revision, claim token, direct owner, the pointer's target). Every move raises the
job's `revision`; a message carries the revision it was sent at, and both the consumer's fence
and the attempt's take (mark_running) refuse a message of another revision. Placement follows
submit: due within DIRECT_WINDOW, the job is written `direct` and the move sends it (then claims
it), or, on a paused queue, it is written pending and recorded in the queue's `held` set in the
same transaction (QueueStateStore.hold_with, by its physical id); later, it is written pending
beyond now + DIRECT_WINDOW, so above every cursor (the same margin as submit's, the move being
an API call under SUBMIT_TIMEOUT). What it interleaves with, and why the invariants hold:
- A sweep's claim. The claim is a conditional write on the key the sweep read. If it lands
  first, the move's condition (status as read) fails and the move reads again: the job is now
  queued, attempts 0, so the move goes on and the sweep's message is stale (older revision). If
  the move lands first, the claim finds the old item gone or turned into a pointer: a claim never
  follows a pointer (JobItemStore._update_job `follow`), so it counts as a lost race on a job
  that is not there, and the cursor may pass: the job is above every cursor, or direct.
- A consumer's run of the old message. The fence reads the job through the pointer: another
  revision, skipped. If the move lands between the fence's read and the take, the take's
  condition (revision) fails: the job never runs from the old message, and a move that answered
  200 has landed before any run of it. If the take lands first, the job is running and the move
  is a 409.
- A cancel, pause or resume by id follows the pointer (one more conditional write at the job's
  key). Whichever lands first on the job's item wins; the other's condition fails (the move
  reads again and, for a cancelled job, answers 409; a cancel that finds the old item gone reads
  the pointer again). A cancel that answered 200 came first, so the move is a 409 and the job
  never runs.
- A second move: both are conditional on the revision read; one lands, the other fails and
  reads again (at most _MOVE_TRIES times, then 409 "retry").
- A submit's or resume's direct send: a pending, direct job is refused (409 "retry in 30 s")
  while its sender may be sending; once SUBMIT_IN_FLIGHT old, the move takes it over (its
  condition includes the direct owner's resumed_at), and a message that sender did send is stale.
- A crash. Before the transaction: nothing changed. After it, before the send of a due-soon job:
  the job is pending and direct at its new key, as after a submit that died before its send; the
  client's repeat (the API answered nothing, or 503) takes it over once SUBMIT_IN_FLIGHT old and
  sends it. A crash never leaves two items of one job: the transaction is all or nothing.
- A queue's catch-up: it reads pending jobs by range (a moved job is found at its new key;
  pointers are not pending) and held ids (physical keys: a job moved again since is gone from
  that key and struck off; if it was due soon on the paused queue, its move recorded it again).
- A retry timer of a moved job names the job's origin (its id) and carries its revision.
Reads by id follow the pointer (a moved job costs one more read); due-range queries leave
pointers out (a FilterExpression). The pointer has no expiry of its own (a paused or retried job
lives for any time, and its id must keep working): when DynamoDB's TTL removes the job's item,
the history Lambda, reading that removal from the stream, deletes the pointer, conditional on
it still naming that item (a job moved on or back since keeps its pointer). A crash or a failed
batch repeats the delete (stream retries); a pointer is never deleted while its job's item
lives, because the item only expires after its job ended and was kept for its retention. The
job's history keeps every move (at most MAX_MOVES). The same stream reading removes the job's
idempotency record and its DAG's listing entries (sundial.services.job_retention): neither has
an expiry of its own, since a job lives any time.

THE CURSOR RULE. A shard's cursor only ever moves forward (advance_cursor's condition), and a
sweep moves it past a job only if that job needs nothing from a sweep: sent (by this sweep, or
by a finished sweep whose done record does not name it in `not_sent`), finished, cancelled,
dead, paused, or owned by another path that sends it itself (direct, a paused DAG's root, a
paused queue's job, which the queue's resume catches up). Every other job holds the cursor
at it: a failed send (un-claimed, or still claimed if the un-claim failed), a claim whose
outcome is unknown, a job claimed by a sweep that is alive or finished without sending it,
a take-over that lost to an un-claim. Why it holds against the writes it interleaves with:
- Two sweeps of one shard (the next tick, or Lambda's async retry of the first). Sweep A
  un-claims a job whose send failed, then writes its done record naming it in `not_sent`.
  Sweep B may have read the job while A still held it: B skips it only if A's record exists
  and does not name it; otherwise it applies the lease (hold while live, take over when
  expired), so B never passes it. A's record is written after all of A's un-claims, so a
  record B can read names everything A did not send.
- A cancel during a sweep's send: the un-claim is refused (the job is no longer queued by
  this sweep) and there is nothing left to send, so the sweep still finishes normally
  (cursor, done record) and no job it sent is retaken after the lease and sent twice.
- A poison job (queue not configured, malformed item, SQS rejecting the entry as the
  sender's fault) is marked dead with the reason (a conditional write on the sweep's own
  claim), so it needs nothing more and the cursor passes it. A retryable failure (throttle,
  SQS internal error, a whole SendMessageBatch failing) holds the cursor instead.
- A queue's pause: a sweep passes over its pending jobs (the resume's catch-up sends them), and
  may move its cursor past them only while the queue is still paused: the cursor's update is
  one transaction with a check of each such queue's pause (SweepStore.advance_cursor). Why: a
  second sweep that read the queue running (after its resume) may claim such a job and die
  before sending it; the resume's catch-up leaves a claimed job to its claimer, whose claim only
  a sweep at or below the job takes over. Had the first sweep moved past it, nothing would.
  With the check, a resume that lands before the cursor moves makes the transaction fail and
  the cursor stays; one that lands after finds the cursor moved while paused, and every sweep
  that reads the queue running reads its range after that, above the job. (Found by the
  fairness simulation, seed 2; tests/unit/services/test_queues.py names it.)
- An error on one shard stops only that shard: its cursor is not moved and it writes no
  done record, so what it claimed is retaken after the lease, as after a crash.
- A sweeper reads the ranges of all its shards first, then claims one priority at a time over
  all of them, then finishes each shard (dispatch.sweeper). A read is therefore older when its
  job is claimed than when shards were swept one by one; nothing relies on its freshness: every
  claim is conditional on the job as it stands, and a job the sweep read but never looked at
  (short of time, a failed step) holds the cursor at it (ShardSweep.finish), so the cursor
  passes only what the sweep itself settled.

FAIR DISPATCH (sundial.dispatch.fairness; a queue's max_dispatch_per_second and weight). The
write and hold sequence of one shard's sweep:
1. Read the cursor item: the cursor and the shard's pacing state (each capped queue's next free
   send slot). Read the due range as before.
2. Plan: each pending job of a capped queue that this sweep would claim gets a slot, at
   max(due, next free slot), the next slot a per-shard gap later, in due order (by due
   second, then priority). A job whose slot would be more than 15 minutes ahead (SQS's longest
   DelaySeconds) is deferred: not claimed, left `pending`, and the cursor holds at it, like a
   job whose send failed. The rest is ordered: priority, then the minute-wide moment it is due
   (its slot if paced), then the queues' weighted turns.
3. Claim and send as before; a paced job's message has DelaySeconds to its slot, counted from
   just before its request, so it is visible at its slot, never before it, and a slot is never
   before the due time: nothing is visible before due.
4. Finish as before (THE CURSOR RULE). If it placed any job, the same UpdateItem that moves the
   cursor also stores the pacing state (so no write per job: at most one per shard per sweep,
   where a sweep today writes the cursor anyway; one more only when the cursor stays held and
   the state changed), conditional on the cursor not having moved past this one and on no
   later sweep (by token) having stored its own state. A refused write moves nothing, which is
   always safe; the next sweep then paces from an older state, so the rate may briefly exceed
   the cap, never the safety rules.
Why the invariants hold, against what it interleaves with:
- Nothing is lost: a deferred job is pending above the held cursor, so the next sweep reads it
  again; it is claimed only when it gets a slot, so no claim waits for a slot (no lease can
  run out while a job waits). A job the sweep sent above the held cursor is covered by the
  done record as before (written because the cursor is held and the sweep sent something).
- No duplicate: pacing changes only the order of claims and the DelaySeconds of sends; every
  claim is the same conditional write as before. Two sweeps of a shard (a retried tick) read
  the same state and plan the same slots; the claim decides who sends.
- Cancel: a deferred job is pending, so a cancel takes it (200) and no sweep claims it after;
  a paced job already sent is `queued`, and the consumer's fence skips it if cancelled. A
  slot's delay only makes the job run later, after any cancel that answered 200 first.
- Pause and resume of a job: a paused job is not pending, so it is not paced; its resume sends
  it itself if due soon (services.release), unpaced.
- A queue's pause: its jobs are passed over (not planned, no slot), deferred ones included, and
  the cursor moves on; the pause recorded the lowest cursor, which was held at or below every
  deferred job, so its resume's catch-up reads them and sends them. The catch-up is not
  paced (it sends what a pause held back; docs/api.md, Fair dispatch, says so).
- A schedule's successor written during the sweep (OccurrenceChain.advance): if its queue is
  capped it is placed after every planned job, or deferred, and the cursor holds at it, before
  its chain is decided, so nothing is written for an occurrence this sweep does not send.
- Catch-up after an outage: overdue jobs count as due now: the capped queue's get slots from
  now on (a next free slot in the past is now, so idle time is not a burst), and the queues'
  turns share the sweep between them, so one queue's backlog does not delay another's.
- Take-over after a crashed sweeper: a `queued` job whose lease has run out is taken over as
  before, and sent at its due time, not paced (the dead sweep may have placed it already). The
  dead sweep's pacing state was not stored, so the next sweep may place new jobs in slots the
  dead one used: the rate may briefly exceed the cap after a crash; nothing else changes.
- Direct sends (the submit's, a release's, a consumer's retries and DAG children) are not
  paced: a job due within 15 minutes of its submission is bounded by the submission quota.

DEAD LETTERS (sundial.runs.dlq_indexer, sundial.services.dead_letters; the simulation's
`--dead-letters` profile races them). Their write sequences:
- Death by the consumer: mark the attempt's job dead (conditional on that attempt), then send
  its envelope to the DLQ, then delete the job's message. A crash between leaves the message,
  SQS redelivers it, and the fence, finding that attempt dead, sends the letter again (the
  index keeps one item per job and death time).
- Redrive by SQS (a consumer crashed on every delivery): the indexer marks the job dead, bound
  to the envelope's attempt (AttemptStore.mark_dead: that attempt still waiting or running),
  then puts the index item, then the message is deleted. A crash between repeats the whole
  message: the conditional write and the put are idempotent (one item per job and death time).
- Indexing a letter of a job that is no longer dead: the job was retried (by id, or by a replay
  of an earlier letter) or finished. Its letter is dropped, and the job is left alone: the
  attempt bound above refuses to mark a later attempt dead (the simulation found the version
  without it marking a retried job dead, seed 3 of that profile).
- Replay: per letter, JobService.retry(only_dead=True) (dead -> pending and direct, send, claim
  with lease 0), then the index item is deleted. Two replays, or a replay and a retry by id,
  race on the conditional requeue: one wins, the other gets a 409 and skips (and deletes the
  item). A crash after the requeue and before the send leaves the job pending and direct; a
  replay meanwhile keeps its letter (in flight: deleting it stranded the job, chaos seed 22 of
  the dead-letter profile), and a retry or replay after SUBMIT_IN_FLIGHT_MS takes the job over;
  the consumer's fence admits exactly attempts + 1, so at most one delivery runs. A crash
  before the item's delete leaves an item whose job is no longer dead: the next replay skips
  it and deletes it.
- Cancel and moves: a dead job cannot be cancelled or moved (409), so neither races a replay;
  a retry by id of a cancelled job re-runs it, by request (docs/api.md, POST /jobs/{id}/retry).

A PAYLOAD IN S3 (sundial.model.payloads, sundial.store.payloads). A submit (POST /jobs, batch, an
idempotent repeat that writes the job again) and a move with a new payload (PATCH /jobs/{id})
whose payload goes to S3 write the object FIRST, under its job's own key
(payloads/<queue>/<job ULID>/<sha256>), tagged unreferenced; then the job's DynamoDB write(s)
exactly as before, carrying the reference; then the tag turns referenced (a move also tags the
payload it replaced unreferenced). The bucket's lifecycle expires only unreferenced objects,
UNREFERENCED_DAYS after their write; the object of a live job is never expired, whatever its
age (a pause has no limit). Interleavings:
- A crash between the put and the job's write leaves an unreferenced object no job references
  (an idempotent repeat stores nothing: it finds the first request's record first). The
  reverse order could leave a job whose payload never arrives; this one cannot.
- A crash between the job's write and the tag leaves a job whose object is still tagged
  unreferenced: the history Lambda, reading the job's insert from the table's stream, tags it
  referenced (sundial.services.job_retention.written), within the stream's retention and
  long before UNREFERENCED_DAYS. A move's crash before tagging the replaced object keeps it
  (a leak, never a loss).
- Every other sequence (sweeps and their claims, direct sends, pauses, cancels, moves of the
  time, the attempt's writes, retries and timers, dead-letter replays, catch-ups) reads and
  writes the job item only and copies the reference as it is; none writes or deletes an
  object. An object belongs to one job, so nothing another job does can change or take it.
- The object goes when its job's item expires (DynamoDB's TTL, a retention after the job
  ended): the history Lambda reads the removal and deletes it (sundial.services.job_retention);
  a retry timer's removal takes nothing (it references its job's object). Objects of the older,
  content-addressed form (payloads/<queue>/<sha256>, possibly shared) are never deleted.
- The consumer (or a worker, through the lease's presigned URL) reads the object the job ITEM
  references, after the fence and before the function; a missing or altered object fails the
  attempt without a retry (the job goes dead, its envelope to the DLQ), an S3 outage fails the
  delivery (SQS redelivers).

DEFERRED SENDS. A DAG node released by a consumer Lambda onto a paused queue
(services.deferral): a consumer's role may not write the queue's state (stacks/consumers.py),
so it cannot record the node for the queue's catch-up (`held`). It releases the node `queued`
and `direct` (no sweep sends it) and puts a retry timer for its first attempt DEFERRED_SEND
ahead, more than DIRECT_WINDOW: no sweep can have passed the timer, and it is an ordinary
pending job of the queue, so the sweeper sends it at its time once the queue runs, or the
queue's catch-up does (it lies above the cursors at the pause). Either way the node's message
comes from the timer, at the resume or DEFERRED_SEND after the release, whichever is later; the
fence admits the queued node's first attempt. A repeat (the parent's redelivery) writes the
same timer (its key is derived from the node, attempt and time), or, a second later, another:
one more message of the attempt, which its holder rule runs once. A node released onto a
running queue is sent at once, as always.
"""

from __future__ import annotations

DIRECT_WINDOW_MS = 900_000
SWEEP_LOOKAHEAD_MS = 840_000
# A pending job written beyond the direct window is this far above every cursor: more than a
# submit can take between reading the clock and writing the item.
SWEEP_MARGIN_MS = DIRECT_WINDOW_MS - SWEEP_LOOKAHEAD_MS
SUBMIT_TIMEOUT_MS = 10_000
CLAIM_LEASE_MS = 300_000
SWEEPER_TIMEOUT_MS = 60_000
# An idempotent repeat that finds the first request unfinished waits this long before
# concluding that the first request died and finishing its work.
SUBMIT_IN_FLIGHT_MS = 30_000
# The sweeper stops taking new jobs when less than this is left before its Lambda deadline.
SWEEP_DEADLINE_MARGIN_MS = 5_000
# How far two AWS machines' clocks may disagree (they keep NTP time to within milliseconds): an
# attempt's holder lease (runner_until, set by the clock of the function that took it) must be
# past by more than this before another delivery takes the attempt over (sundial.store.attempts).
CLOCK_SKEW_MS = 5_000
# The longest a Lambda function runs (its hard timeout): a consumer's lease on an attempt when
# its deadline is unknown, and the lease of an attempt taken before holders were recorded.
LEGACY_RUNNER_MS = 15 * 60 * 1000
# A consumer's deferred send of a DAG node released onto a paused queue: a timer this far ahead.
DEFERRED_SEND_MS = DIRECT_WINDOW_MS + 1_000

assert SWEEP_MARGIN_MS > SUBMIT_TIMEOUT_MS * 2
assert CLAIM_LEASE_MS > 2 * SWEEPER_TIMEOUT_MS
assert SUBMIT_IN_FLIGHT_MS > SUBMIT_TIMEOUT_MS
