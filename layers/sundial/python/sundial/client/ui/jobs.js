// The admin UI's pages of a job (with its actions: cancel, retry, pause, resume, run now,
// change) and of a schedule (its upcoming occurrences apart from its past runs).
"use strict";

const PRIORITIES = ["critical", "high", "normal", "low"];
// A job waiting for its first attempt: it may be run now or changed (PATCH /jobs/{id}).
const waiting = (job) => ["pending", "paused", "queued"].includes(job.status) && job.attempts === 0;

function jobButtons(job, path) {
  const id = job.id;
  const buttons = [];
  if (waiting(job)) {
    buttons.push(actionButton("Run now", async () => {
      const ran = await api("POST", `${path}/run-now`);
      return ran.status === "queued"
        ? `Job ${id} handed to its queue: it runs now`
        : `Job ${id} set to run now; it is ${ran.status} (a paused job or queue holds it)`;
    }, { "data-action": "run-now" }, `Run job ${id} now`));
  }
  if (["pending", "queued", "paused", "blocked", "failed"].includes(job.status)) {
    buttons.push(actionButton("Cancel", async () => {
      if (!confirm(`Cancel job ${id}?`)) return null;
      await api("DELETE", path);
      return `Job ${id} cancelled`;
    }, { class: "danger", "data-action": "cancel" }, `Cancel job ${id}`));
  }
  if (["dead", "failed", "cancelled"].includes(job.status)) {
    buttons.push(postButton("Retry now", `${path}/retry`, `Job ${id} re-queued`,
      { "data-action": "retry" }, `Retry job ${id}`));
  }
  if (job.status === "pending") {
    buttons.push(postButton("Pause", `${path}/pause`, `Job ${id} paused`,
      { "data-action": "pause" }, `Pause job ${id}`));
  }
  if (job.status === "paused") {
    buttons.push(postButton("Resume", `${path}/resume`, `Job ${id} resumed`,
      { "data-action": "resume" }, `Resume job ${id}`));
  }
  return buttons;
}

// The change form: only what the person changed is sent; the API's refusals are shown as the
// API words them (a payload that is not JSON is refused here, before anything is sent).
function changeForm(job, path) {
  const runAt = h("input", { type: "text", name: "run_at", class: "mono", size: 28, value: job.run_at,
    "aria-label": "run at", spellcheck: "false" });
  const delay = h("input", { type: "number", name: "delay_seconds", min: 0, size: 8,
    "aria-label": "or in seconds", placeholder: "seconds" });
  const priority = h("select", { name: "priority", "aria-label": "priority" },
    PRIORITIES.map((p) => h("option", { value: p, selected: p === job.priority }, p)));
  const initialPayload = job.payload_ref ? "" : JSON.stringify(job.payload, null, 2);
  const payload = h("textarea", { name: "payload", rows: 6, class: "mono", "aria-label": "payload",
    spellcheck: "false", placeholder: job.payload_ref ? "stored in S3: leave empty to keep it" : null });
  payload.value = initialPayload;
  const save = h("button", { type: "submit", "data-action": "change" }, "Save changes");
  const form = h("form", { id: "change-form", class: "change" },
    h("label", {}, "Run at ", runAt), h("label", {}, "or in ", delay, " seconds"),
    h("label", {}, "Priority ", priority), h("label", { class: "wide" }, "Payload (JSON)", payload),
    h("div", {}, save));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    act(save, async () => {
      const body = {};
      if (runAt.value.trim() !== job.run_at) body.run_at = runAt.value.trim();
      if (delay.value !== "") body.delay_seconds = Number(delay.value);
      if (priority.value !== job.priority) body.priority = priority.value;
      if (payload.value !== initialPayload && payload.value.trim() !== "") {
        try {
          body.payload = JSON.parse(payload.value);
        } catch (error) {
          throw new ApiError(0, { message: `payload: not JSON (${error.message})` });
        }
      }
      await api("PATCH", path, { body });
      return `Job ${job.id} changed`;
    }, `Change job ${job.id}`);
  });
  return h("details", { id: "change-job", class: "card" }, h("summary", {}, "Change…"), form);
}

async function jobPage(id) {
  const job = await api("GET", `/jobs/${seg(id)}`);
  const path = `/jobs/${seg(id)}`;
  const hasResult = job.result !== null && job.result !== undefined;
  return [
    toolbar(h("h1", {}, "Job ", h("span", { class: "mono" }, job.id)),
      badge(job.status), h("span", { class: "spacer" }), jobButtons(job, path), refreshButton()),
    h("div", { class: "card" }, fields([
      ["queue", job.queue], ["status", job.status], ["priority", job.priority],
      ["run at", when(job.run_at)], ["due at", job.due_at !== job.run_at ? when(job.due_at) : null],
      ["attempts", `${job.attempts} of ${job.max_attempts}`],
      ["next attempt at", when(job.next_attempt_at)], ["created at", when(job.created_at)],
      ["queued at", when(job.queued_at)], ["started at", when(job.started_at)],
      ["finished at", when(job.finished_at)], ["retried at", when(job.retried_at)],
      ["paused at", when(job.paused_at)], ["cancelled at", when(job.cancelled_at)],
      ["schedule", job.schedule_id ? link(`#/schedules/${seg(job.schedule_id)}`, job.schedule_id) : null],
      ["DAG", job.dag_id ? link(`#/dags/${seg(job.dag_id)}`, `${job.dag_id} (${job.dag_node})`) : null],
      ["idempotency key", job.idempotency_key],
    ])),
    waiting(job) ? changeForm(job, path) : null,
    hasResult ? [h("h2", {}, "Result"), h("div", { id: "result" }, jsonBlock(job.result))] : null,
    // A payload stored in S3 (up to 5 MiB) is not fetched: its reference is shown instead.
    h("h2", {}, job.payload_ref ? "Payload (stored in S3)" : "Payload"),
    h("div", { id: "payload" }, jsonBlock(job.payload_ref || job.payload, "No payload.")),
    h("h2", {}, "Attempt errors"), attemptErrors(job.history || []),
  ];
}

// -- schedules ------------------------------------------------------------------------------

const UPCOMING_LIMIT = 100; // more than a schedule decides ahead (15 minutes of 10-second runs)

async function schedulePage(id, before) {
  const path = `/schedules/${seg(id)}`;
  const [schedule, past, upcoming] = await Promise.all([
    api("GET", path),
    api("GET", `${path}/runs`, { query: { when: "past", limit: PAGE_SIZE, before } }),
    before ? null : api("GET", `${path}/runs`, { query: { when: "upcoming", limit: UPCOMING_LIMIT } }),
  ]);
  const name = `schedule ${schedule.name || schedule.id}`;
  const toggle = schedule.state === "paused"
    ? postButton("Resume", `${path}/resume`, `Schedule ${schedule.name || id} resumed`,
      { "data-action": "resume" }, `Resume ${name}`)
    : schedule.state === "active"
      ? postButton("Pause", `${path}/pause`, `Schedule ${schedule.name || id} paused`,
        { "data-action": "pause" }, `Pause ${name}`) : null;
  const jobCell = (run) => h("td", { class: "mono" }, link(`#/jobs/${seg(run.job_id)}`, run.job_id));
  const status = (run) => (run.status ? badge(run.status) : h("span", { class: "muted" }, "expired"));
  const pastRows = past.runs.map((run) => h("tr", { "data-job": run.job_id },
    h("td", { class: "mono" }, when(run.scheduled_for)), h("td", {}, badge(run.outcome)),
    h("td", {}, status(run)), h("td", { class: "num" }, run.attempts ?? "–"), jobCell(run)));
  // Soonest first: what runs next at the top.
  const aheadRows = upcoming ? [...upcoming.runs].reverse().map((run) => h("tr", { "data-job": run.job_id },
    h("td", { class: "mono" }, when(run.scheduled_for)),
    h("td", {}, run.outcome === "fired" ? "sent ahead, due then" : run.outcome),
    h("td", {}, status(run)), jobCell(run))) : [];
  const older = past.next_before
    ? h("a", { href: `#/schedules/${seg(id)}?before=${encodeURIComponent(past.next_before)}` }, "Older runs")
    : null;
  return [
    toolbar(h("h1", {}, "Schedule ", schedule.name ? `${schedule.name} ` : "", h("span", { class: "mono" }, schedule.id)),
      h("span", { id: "schedule-state" }, badge(schedule.state)), h("span", { class: "spacer" }),
      toggle, refreshButton()),
    h("div", { class: "card" }, fields([
      ["queue", schedule.queue], ["cron", schedule.cron ? `${schedule.cron} (${schedule.timezone})` : null],
      ["rate", schedule.rate], ["state", schedule.state], ["next run", when(schedule.next_run_at) || "none"],
      ["last run", schedule.last_run ? `${when(schedule.last_run.scheduled_for)} (${schedule.last_run.outcome})` : "none yet"],
      ["misfire", schedule.misfire], ["priority", schedule.priority],
      ["start at", when(schedule.start_at)], ["end at", when(schedule.end_at)],
      ["created at", when(schedule.created_at)], ["paused at", when(schedule.paused_at)],
    ])),
    h("h2", {}, "Payload"), jsonBlock(schedule.payload, "No payload."),
    upcoming ? [
      h("h2", {}, "Upcoming (decided, not yet due)"),
      aheadRows.length
        ? table([{ title: "scheduled for" }, { title: "state" }, { title: "job status" }, { title: "job" }],
          aheadRows, { id: "upcoming-runs" })
        : h("p", { class: "muted", id: "no-upcoming-runs" },
          "None yet: an occurrence is sent to its queue ahead of its time once it is due within 15 minutes."),
      upcoming.next_before ? h("p", { class: "muted" }, `More are decided than the ${UPCOMING_LIMIT} shown.`) : null,
    ] : null,
    h("h2", {}, before ? `Past runs before ${when(before)}` : "Past runs (newest first)"),
    pastRows.length
      ? table([{ title: "scheduled for" }, { title: "outcome" }, { title: "job status" },
        { title: "attempts", num: true }, { title: "job" }], pastRows, { id: "runs" })
      : h("p", { class: "muted", id: "no-past-runs" }, "No runs yet."),
    older ? toolbar(older) : null,
  ];
}
