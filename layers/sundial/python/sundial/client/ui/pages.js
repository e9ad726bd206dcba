// The admin UI's pages of queues, dead letters and jobs. Each page function returns what
// the page shows (app.js puts it in the page, if the page is still the one wanted).
"use strict";

function refreshButton() {
  return actionButton("Refresh", async () => null, { "data-action": "refresh" }, "Refresh");
}

function toolbar(...children) {
  return h("div", { class: "toolbar" }, children);
}

// -- queues ---------------------------------------------------------------------------------

async function queuesPage() {
  const { queues } = await api("GET", "/queues");
  const rows = queues.map((q) => {
    const state = q.paused ? "paused" : (q.catching_up ? "catching up" : "running");
    const [verb, done] = q.paused ? ["resume", "resumed"] : ["pause", "paused"];
    const label = q.paused ? "Resume" : "Pause";
    const toggle = postButton(label, `/queues/${seg(q.queue)}/${verb}`, `Queue ${q.queue} ${done}`,
      { "data-action": verb }, `${label} queue ${q.queue}`);
    const dead = `${q.dead_letters}${q.dead_letters_capped ? "+" : ""}`;
    return h("tr", { "data-queue": q.queue },
      h("td", {}, h("b", {}, q.queue)),
      h("td", { class: "state", "data-state": state }, state),
      h("td", { class: "num visible" }, q.messages.visible),
      h("td", { class: "num" }, q.messages.in_flight),
      h("td", { class: "num" }, q.messages.delayed),
      h("td", { class: "num dead" }, link(`#/dead/${seg(q.queue)}`, dead)),
      h("td", { class: "num" }, q.dead_letter_queue_messages ?? "–"),
      h("td", { class: "listings" },
        link(`#/queue-jobs/${seg(q.queue)}?status=pending`, "jobs"), " · ",
        link(`#/queue-schedules/${seg(q.queue)}`, "schedules"), " · ",
        link(`#/queue-dags/${seg(q.queue)}`, "DAGs")),
      h("td", {}, toggle));
  });
  const columns = [{ title: "queue" }, { title: "state" }, { title: "visible", num: true },
    { title: "in flight", num: true }, { title: "delayed", num: true },
    { title: "dead letters", num: true }, { title: "in DLQ", num: true }, { title: "lists" },
    { title: "" }];
  return [
    toolbar(h("h1", {}, `Queues (${queues.length})`), h("span", { class: "spacer" }), refreshButton()),
    table(columns, rows, { id: "queues" }),
    h("p", { class: "muted" }, "Visible, in flight and delayed are the SQS queue's own counts ",
      "(priority queue included). Pausing a queue holds its jobs in Sundial; what came due ",
      "meanwhile is sent when it resumes."),
  ];
}

// -- paging (dead letters, a queue's listings) ----------------------------------------------

const PAGE_SIZE = 20;

// The cursors of the pages seen so far of one listing: "Previous" goes back along them.
function pager(paging, page) {
  const pageNumber = paging.cursors.length;
  const previous = h("button", { type: "button", disabled: pageNumber === 1, "data-action": "previous" }, "Previous");
  previous.addEventListener("click", () => {
    paging.cursors.pop();
    act(previous, async () => null, "Previous page");
  });
  const next = h("button", { type: "button", disabled: !page.next_cursor, "data-action": "next" }, "Next");
  next.addEventListener("click", () => {
    paging.cursors.push(page.next_cursor);
    act(next, async () => null, "Next page");
  });
  return toolbar(previous, h("span", { class: "muted pager" }, `page ${pageNumber}`), next);
}

// -- dead letters ---------------------------------------------------------------------------

const deadPaging = { listing: null, cursors: [null], inspected: null };
const letterKey = (letter) => `${letter.dead_at}|${letter.job_id}|${letter.error_type}`;

async function deadPage(queue, pageSize) {
  const listing = `${queue}?${pageSize}`;
  if (deadPaging.listing !== listing) Object.assign(deadPaging, { listing, cursors: [null], inspected: null });
  const cursor = deadPaging.cursors[deadPaging.cursors.length - 1];
  const page = await api("GET", `/queues/${seg(queue)}/dead`, { query: { limit: pageSize, cursor } });
  const rows = page.items.map((letter) => {
    const inspect = h("button", { type: "button", "data-action": "inspect" }, "Inspect");
    inspect.addEventListener("click", () => {
      deadPaging.inspected = letterKey(letter);
      act(inspect, async () => null, `Inspect the letter of ${letter.job_id || "a message"}`);
    });
    const replay = letter.job_id ? actionButton("Replay", async () => {
      const result = await replayOne(queue, letter);
      return result.replayed.length
        ? `Job ${letter.job_id} re-queued`
        : `Job ${letter.job_id} was no longer dead: its letter was removed`;
    }, { "data-action": "replay" }, `Replay job ${letter.job_id}`) : h("span", { class: "muted" }, "not a job");
    const selected = deadPaging.inspected === letterKey(letter);
    return h("tr", { "data-job": letter.job_id || "", class: selected ? "selected" : null },
      h("td", { class: "mono" }, when(letter.dead_at)),
      h("td", { class: "mono" }, letter.job_id ? link(`#/jobs/${seg(letter.job_id)}`, letter.job_id) : "–"),
      h("td", { class: "num" }, letter.attempt ?? "–"),
      h("td", {}, letter.error_type),
      h("td", { class: "text" }, letter.message.length > 120 ? `${letter.message.slice(0, 120)}…` : letter.message),
      h("td", { class: "actions" }, inspect, " ", replay));
  });
  const columns = [{ title: "dead at" }, { title: "job" }, { title: "attempt", num: true },
    { title: "error type" }, { title: "message" }, { title: "" }];
  const inspected = page.items.find((l) => deadPaging.inspected === letterKey(l));
  return [
    toolbar(h("h1", {}, `Dead letters of ${queue}`), h("span", { class: "spacer" }),
      actionButton("Replay all", async () => {
        if (!confirm(`Re-queue every dead job of ${queue}?`)) return null;
        return replayAll(queue);
      }, { "data-action": "replay-all" }, `Replay every dead job of ${queue}`),
      purgeControls(queue), refreshButton()),
    page.items.length
      ? table(columns, rows, { id: "dead-letters" })
      : h("p", { id: "dead-letters-empty", class: "card" }, "No dead letters on this page."),
    pager(deadPaging, page),
    inspected ? await letterDetail(inspected) : null,
  ];
}

async function replayOne(queue, letter) {
  // Only the moment the letter died is read, and only its job's letter is replayed.
  const until = new Date(Date.parse(letter.dead_at) + 1).toISOString();
  return api("POST", `/queues/${seg(queue)}/dead/replay`, {
    body: { job_id: letter.job_id, since: letter.dead_at, until, limit: 1 },
  });
}

async function replayAll(queue) {
  let replayed = 0, skipped = 0, unreplayable = 0, more = true;
  while (more) {
    const result = await api("POST", `/queues/${seg(queue)}/dead/replay`, { body: {} });
    replayed += result.replayed.length;
    skipped += result.skipped;
    unreplayable += result.unreplayable;
    more = result.more;
  }
  deadPaging.cursors = [null];
  return `${replayed} jobs re-queued from ${queue} (${skipped} were no longer dead, ${unreplayable} not Sundial jobs)`;
}

function purgeControls(queue) {
  const input = h("input", { type: "text", class: "mono", size: 24, "aria-label": "older than",
    value: new Date().toISOString().replace(/\.\d+Z$/, "Z") });
  const purge = h("button", { type: "button", class: "danger", "data-action": "purge" }, "Purge older than");
  purge.addEventListener("click", () => act(purge, async () => {
    if (!confirm(`Delete ${queue}'s dead letters older than ${input.value}? The jobs stay.`)) return null;
    let purged = 0, more = true;
    while (more) {
      const result = await api("DELETE", `/queues/${seg(queue)}/dead`, { query: { older_than: input.value } });
      purged += result.purged;
      more = result.more;
    }
    deadPaging.cursors = [null];
    return `${purged} dead letters of ${queue} purged`;
  }, `Purge ${queue}'s dead letters`));
  return h("span", {}, purge, " ", input);
}

async function letterDetail(letter) {
  let attempts = null;
  if (letter.job_id) {
    try {
      const job = await api("GET", `/jobs/${seg(letter.job_id)}`);
      attempts = attemptErrors(job.history || []);
    } catch (error) {
      attempts = h("p", { class: "muted" }, `The job: ${errorText(error)}`);
    }
  }
  return h("section", { id: "letter-detail", class: "card" },
    h("h2", {}, `Letter of ${letter.job_id || "a message"}`),
    fields([["dead at", when(letter.dead_at)], ["attempt", letter.attempt],
      ["error type", letter.error_type], ["message", letter.message]]),
    h("h2", {}, "Envelope"), jsonBlock(letter.envelope),
    attempts ? [h("h2", {}, "Attempt errors"), attempts] : null);
}

// One row an attempt; its traceback, if any, in a row of its own below, the table's width.
function attemptErrors(history) {
  if (!history.length) return h("p", { class: "muted", id: "no-attempt-errors" }, "No attempt failed.");
  const rows = history.map((e) => [
    h("tr", { class: e.traceback_head ? "with-traceback" : null },
      h("td", { class: "num" }, e.attempt), h("td", { class: "mono" }, when(e.at)),
      h("td", {}, e.error_type), h("td", { class: "text" }, e.message)),
    e.traceback_head
      ? h("tr", { class: "traceback-row" }, h("td", { colspan: 4 }, h("pre", { class: "traceback" }, e.traceback_head)))
      : null,
  ]);
  return table([{ title: "attempt", num: true }, { title: "at" }, { title: "error type" },
    { title: "message" }], rows, { class: "attempt-errors" });
}
