// The Sundial admin UI: vanilla JavaScript, no dependencies, no build step.
// Pages by URL hash: #/queues, #/dead/QUEUE[?limit=N], #/jobs/ID, #/schedules/ID, #/dags/ID;
// a queue's listings: #/queue-schedules/QUEUE, #/queue-dags/QUEUE, #/queue-jobs/QUEUE?status=S.
// Everything from the API is put in the page as text (textContent, attributes), never as HTML.
"use strict";

const API = "/api";
const SVG_NS = "http://www.w3.org/2000/svg";
const STATUSES = ["pending", "blocked", "queued", "running", "paused", "succeeded", "failed",
  "dead", "cancelled"];

// -- the API --------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.errors = (body && Array.isArray(body.errors)) ? body.errors : [];
  }
}

async function api(method, path, { query, body } = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const url = API + path + (params.toString() ? `?${params}` : "");
  const headers = { "X-Sundial-UI": "1", Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (failure) {
    throw new ApiError(0, { message: `no answer from the UI's server: ${failure.message}` });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { message: text };
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

const seg = (value) => encodeURIComponent(value);

// -- building the page (text only) ------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function s(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

const main = () => document.getElementById("main");

function show(...nodes) {
  main().replaceChildren(...nodes);
}

function badge(status) {
  return h("span", { class: `badge s-${status}`, "data-status": status }, status);
}

function jsonBlock(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

function fields(pairs) {
  const list = h("dl", { class: "fields" });
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    list.append(h("dt", {}, name), h("dd", { "data-field": name }, value));
  }
  return list;
}

function table(columns, rows, attrs = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  return h("table", attrs, h("thead", {}, head), h("tbody", {}, rows));
}

const when = (text) => (text ? text.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "");
const link = (href, text) => h("a", { href }, text);

// -- errors and notices ---------------------------------------------------------------------

function showError(error) {
  const box = document.getElementById("error");
  const status = error.status ? ` (${error.status})` : "";
  const items = (error.errors || []).map((e) => h("li", {}, h("b", {}, e.field), `: ${e.reason}`));
  box.replaceChildren(h("strong", {}, `Error${status}: `), error.message,
    items.length ? h("ul", {}, items) : null);
  box.hidden = false;
}

function notify(text) {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.hidden = false;
}

function clearMessages() {
  document.getElementById("error").hidden = true;
  document.getElementById("notice").hidden = true;
}

// Runs an action from a button: disables it meanwhile, shows the API's error if any, then
// re-renders the page (so what is shown is the API's state after the action).
async function act(button, action, done) {
  clearMessages();
  button.disabled = true;
  try {
    const message = await action();
    await route();
    if (message) notify(message);
  } catch (error) {
    showError(error);
    button.disabled = false;
  }
  if (done) done();
}

function actionButton(label, action, attrs = {}) {
  const button = h("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", () => act(button, action));
  return button;
}

// -- queues ---------------------------------------------------------------------------------

async function queuesPage() {
  const { queues } = await api("GET", "/queues");
  const rows = queues.map((q) => {
    const state = q.paused ? "paused" : (q.catching_up ? "catching up" : "running");
    const [verb, done] = q.paused ? ["resume", "resumed"] : ["pause", "paused"];
    const toggle = postButton(q.paused ? "Resume" : "Pause", `/queues/${seg(q.queue)}/${verb}`,
      `Queue ${q.queue} ${done}`, { "data-action": verb });
    const dead = `${q.dead_letters}${q.dead_letters_capped ? "+" : ""}`;
    return h("tr", { "data-queue": q.queue },
      h("td", {}, h("b", {}, q.queue)),
      h("td", { class: "state", "data-state": state }, state),
      h("td", { class: "num visible" }, q.messages.visible),
      h("td", { class: "num" }, q.messages.in_flight),
      h("td", { class: "num" }, q.messages.delayed),
      h("td", { class: "num dead" }, link(`#/dead/${seg(q.queue)}`, dead)),
      h("td", { class: "num" }, q.dead_letter_queue_messages ?? ""),
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
  show(
    h("div", { class: "toolbar" }, h("h1", {}, `Queues (${queues.length})`),
      h("span", { class: "spacer" }), refreshButton()),
    table(columns, rows, { id: "queues" }),
    h("p", { class: "muted" }, "Visible, in flight and delayed are the SQS queue's own counts ",
      "(priority queue included). Pausing a queue holds its jobs in Sundial; what came due ",
      "meanwhile is sent when it resumes."),
  );
}

// A button that POSTs to `path` (pause, resume, retry), then shows `done`.
function postButton(label, path, done, attrs) {
  return actionButton(label, async () => {
    await api("POST", path);
    return done;
  }, attrs);
}

function refreshButton() {
  return actionButton("Refresh", async () => null);
}

// -- dead letters ---------------------------------------------------------------------------

const PAGE_SIZE = 20;
// The cursors of the pages seen so far, per queue: "Previous" goes back along them.
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
      act(inspect, async () => null);
    });
    const replay = letter.job_id ? actionButton("Replay", async () => {
      const result = await replayOne(queue, letter);
      return result.replayed.length
        ? `Job ${letter.job_id} re-queued`
        : `Job ${letter.job_id} was no longer dead: its letter was removed`;
    }, { "data-action": "replay" }) : h("span", { class: "muted" }, "not a job");
    const selected = deadPaging.inspected === letterKey(letter);
    return h("tr", { "data-job": letter.job_id || "", class: selected ? "selected" : null },
      h("td", { class: "mono" }, when(letter.dead_at)),
      h("td", { class: "mono" }, letter.job_id ? link(`#/jobs/${seg(letter.job_id)}`, letter.job_id) : ""),
      h("td", { class: "num" }, letter.attempt ?? ""),
      h("td", {}, letter.error_type),
      h("td", {}, letter.message.length > 120 ? `${letter.message.slice(0, 120)}…` : letter.message),
      h("td", {}, inspect, " ", replay));
  });
  const pageNumber = deadPaging.cursors.length;
  const previous = h("button", { type: "button", disabled: pageNumber === 1 }, "Previous");
  previous.addEventListener("click", () => {
    deadPaging.cursors.pop();
    act(previous, async () => null);
  });
  const next = h("button", { type: "button", disabled: !page.next_cursor, "data-action": "next" }, "Next");
  next.addEventListener("click", () => {
    deadPaging.cursors.push(page.next_cursor);
    act(next, async () => null);
  });
  const columns = [{ title: "dead at" }, { title: "job" }, { title: "attempt", num: true },
    { title: "error type" }, { title: "message" }, { title: "" }];
  const inspected = page.items.find((l) => deadPaging.inspected === letterKey(l));
  show(
    h("div", { class: "toolbar" },
      h("h1", {}, `Dead letters of ${queue}`), h("span", { class: "spacer" }),
      actionButton("Replay all", async () => {
        if (!confirm(`Re-queue every dead job of ${queue}?`)) return null;
        return replayAll(queue);
      }, { "data-action": "replay-all" }),
      purgeControls(queue), refreshButton()),
    page.items.length
      ? table(columns, rows, { id: "dead-letters" })
      : h("p", { id: "dead-letters-empty", class: "card" }, "No dead letters on this page."),
    h("div", { class: "toolbar" }, previous, h("span", { class: "muted" }, `page ${pageNumber}`), next),
    inspected ? await letterDetail(inspected) : null,
  );
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
    notify(`Replaying… ${replayed} re-queued`);
  }
  deadPaging.cursors = [null];
  return `${replayed} jobs re-queued (${skipped} were no longer dead, ${unreplayable} not Sundial jobs)`;
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
    return `${purged} dead letters purged`;
  }));
  return h("span", {}, purge, " ", input);
}

async function letterDetail(letter) {
  let attempts = null;
  if (letter.job_id) {
    try {
      const job = await api("GET", `/jobs/${seg(letter.job_id)}`);
      attempts = attemptErrors(job.history || []);
    } catch (error) {
      attempts = h("p", { class: "muted" }, `The job: ${error.message}`);
    }
  }
  return h("section", { id: "letter-detail", class: "card" },
    h("h2", {}, `Letter of ${letter.job_id || "a message"}`),
    fields([["dead at", when(letter.dead_at)], ["attempt", letter.attempt],
      ["error type", letter.error_type], ["message", letter.message]]),
    h("h2", {}, "Envelope"), jsonBlock(letter.envelope),
    attempts ? h("h2", {}, "Attempt errors") : null, attempts);
}

function attemptErrors(history) {
  if (!history.length) return h("p", { class: "muted" }, "No attempt failed.");
  const rows = history.map((e) => h("tr", {},
    h("td", { class: "num" }, e.attempt), h("td", { class: "mono" }, when(e.at)),
    h("td", {}, e.error_type), h("td", {}, e.message),
    h("td", {}, e.traceback_head ? h("pre", {}, e.traceback_head) : "")));
  return table([{ title: "attempt", num: true }, { title: "at" }, { title: "error type" },
    { title: "message" }, { title: "traceback" }], rows, { class: "attempt-errors" });
}

// -- jobs -----------------------------------------------------------------------------------

async function jobPage(id) {
  const job = await api("GET", `/jobs/${seg(id)}`);
  const path = `/jobs/${seg(id)}`;
  const buttons = [];
  if (["pending", "queued", "paused", "blocked", "failed"].includes(job.status)) {
    buttons.push(actionButton("Cancel", async () => {
      if (!confirm(`Cancel job ${id}?`)) return null;
      await api("DELETE", path);
      return "Job cancelled";
    }, { class: "danger", "data-action": "cancel" }));
  }
  if (["dead", "failed", "cancelled"].includes(job.status)) {
    buttons.push(postButton("Retry now", `${path}/retry`, "Job re-queued", { "data-action": "retry" }));
  }
  if (job.status === "pending") {
    buttons.push(postButton("Pause", `${path}/pause`, "Job paused", { "data-action": "pause" }));
  }
  if (job.status === "paused") {
    buttons.push(postButton("Resume", `${path}/resume`, "Job resumed", { "data-action": "resume" }));
  }
  show(
    h("div", { class: "toolbar" }, h("h1", {}, "Job ", h("span", { class: "mono" }, job.id)),
      badge(job.status), h("span", { class: "spacer" }), buttons, refreshButton()),
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
    // A payload stored in S3 (up to 5 MiB) is not fetched: its reference is shown instead.
    h("h2", {}, job.payload_ref ? "Payload (stored in S3)" : "Payload"),
    jsonBlock(job.payload_ref || job.payload),
    job.result !== null && job.result !== undefined ? [h("h2", {}, "Result"), jsonBlock(job.result)] : null,
    h("h2", {}, "Attempt errors"), attemptErrors(job.history || []),
  );
}

// -- schedules ------------------------------------------------------------------------------

async function schedulePage(id, before) {
  const path = `/schedules/${seg(id)}`;
  const [schedule, runs] = await Promise.all([
    api("GET", path), api("GET", `${path}/runs`, { query: { limit: 20, before } }),
  ]);
  const toggle = schedule.state === "paused"
    ? postButton("Resume", `${path}/resume`, "Schedule resumed", { "data-action": "resume" })
    : schedule.state === "active"
      ? postButton("Pause", `${path}/pause`, "Schedule paused", { "data-action": "pause" }) : null;
  const rows = runs.runs.map((run) => h("tr", {},
    h("td", { class: "mono" }, when(run.scheduled_for)), h("td", {}, badge(run.outcome)),
    h("td", {}, run.status ? badge(run.status) : h("span", { class: "muted" }, "expired")),
    h("td", { class: "num" }, run.attempts ?? ""),
    h("td", { class: "mono" }, link(`#/jobs/${seg(run.job_id)}`, run.job_id))));
  const older = runs.next_before
    ? h("a", { href: `#/schedules/${seg(id)}?before=${encodeURIComponent(runs.next_before)}` }, "Older runs")
    : null;
  show(
    h("div", { class: "toolbar" },
      h("h1", {}, "Schedule ", schedule.name ? `${schedule.name} ` : "", h("span", { class: "mono" }, schedule.id)),
      h("span", { id: "schedule-state" }, badge(schedule.state)), h("span", { class: "spacer" }),
      toggle, refreshButton()),
    h("div", { class: "card" }, fields([
      ["queue", schedule.queue], ["cron", schedule.cron ? `${schedule.cron} (${schedule.timezone})` : null],
      ["rate", schedule.rate], ["state", schedule.state], ["next run", when(schedule.next_run_at) || "none"],
      ["last run", schedule.last_run ? `${when(schedule.last_run.scheduled_for)} (${schedule.last_run.outcome})` : null],
      ["misfire", schedule.misfire], ["priority", schedule.priority],
      ["start at", when(schedule.start_at)], ["end at", when(schedule.end_at)],
      ["created at", when(schedule.created_at)], ["paused at", when(schedule.paused_at)],
    ])),
    h("h2", {}, "Payload"), jsonBlock(schedule.payload),
    h("h2", {}, before ? `Runs before ${when(before)}` : "Past runs (newest first)"),
    rows.length ? table([{ title: "scheduled for" }, { title: "outcome" }, { title: "job status" },
      { title: "attempts", num: true }, { title: "job" }], rows, { id: "runs" })
      : h("p", { class: "muted" }, "No runs yet."),
    h("div", { class: "toolbar" }, older),
  );
}

// -- DAGs -----------------------------------------------------------------------------------

// Each node's depth: the longest chain of parents above it (roots: 0).
function depths(nodes) {
  const depth = {};
  const visit = (name, seen) => {
    if (name in depth) return depth[name];
    if (seen.has(name) || !nodes[name]) return 0;
    seen.add(name);
    const parents = nodes[name].depends_on || [];
    depth[name] = parents.length ? 1 + Math.max(...parents.map((p) => visit(p, seen))) : 0;
    return depth[name];
  };
  for (const name of Object.keys(nodes)) visit(name, new Set());
  return depth;
}

function dagGraph(nodes) {
  const names = Object.keys(nodes).sort();
  const depth = depths(nodes);
  const layers = [];
  for (const name of names) (layers[depth[name]] = layers[depth[name]] || []).push(name);
  const [width, height, gapX, gapY, pad] = [150, 46, 70, 22, 20];
  const tallest = Math.max(...layers.map((l) => l.length));
  const totalW = pad * 2 + layers.length * width + (layers.length - 1) * gapX;
  const totalH = pad * 2 + tallest * height + (tallest - 1) * gapY;
  const at = {};
  layers.forEach((layer, column) => {
    const offset = (totalH - (layer.length * height + (layer.length - 1) * gapY)) / 2;
    layer.forEach((name, row) => {
      at[name] = { x: pad + column * (width + gapX), y: offset + row * (height + gapY) };
    });
  });
  const svg = s("svg", { class: "dag", id: "dag-graph", width: totalW, height: totalH,
    viewBox: `0 0 ${totalW} ${totalH}`, role: "img", "aria-label": "the DAG's nodes by depth" });
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8592a3" }))));
  for (const name of names) {
    for (const parent of nodes[name].depends_on || []) {
      if (!at[parent]) continue;
      const [x1, y1] = [at[parent].x + width, at[parent].y + height / 2];
      const [x2, y2] = [at[name].x, at[name].y + height / 2];
      const mid = (x1 + x2) / 2;
      svg.append(s("path", { class: "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`,
        "marker-end": "url(#arrow)" }));
    }
  }
  for (const name of names) {
    const node = nodes[name];
    const { x, y } = at[name];
    const label = name.length > 20 ? `${name.slice(0, 19)}…` : name;
    svg.append(s("a", { href: `#/jobs/${seg(node.id)}`, "data-node": name, "data-status": node.status },
      s("title", {}, `${name}: ${node.status} (attempts ${node.attempts}/${node.max_attempts})`),
      s("rect", { class: `node s-${node.status}`, x, y, width, height, rx: 8 }),
      s("text", { x: x + 10, y: y + 19, fill: "#fff", "font-weight": 600 }, label),
      s("text", { x: x + 10, y: y + 36, fill: "#fff" }, node.status)));
  }
  return svg;
}

async function dagPage(id) {
  const path = `/dags/${seg(id)}`;
  const dag = await api("GET", path);
  const buttons = [];
  if (dag.status === "running") {
    buttons.push(postButton("Pause", `${path}/pause`, "DAG paused", { "data-action": "pause" }));
  }
  if (dag.status === "paused") {
    buttons.push(postButton("Resume", `${path}/resume`, "DAG resumed", { "data-action": "resume" }));
  }
  if (dag.status === "running" || dag.status === "paused") {
    buttons.push(actionButton("Cancel", async () => {
      if (!confirm(`Cancel every unfinished node of ${dag.name}?`)) return null;
      await api("DELETE", path);
      return "DAG cancelled";
    }, { class: "danger", "data-action": "cancel" }));
  }
  const present = STATUSES.filter((st) => dag.counts[st]);
  const rows = Object.entries(dag.nodes).sort(([a], [b]) => a.localeCompare(b)).map(([name, n]) =>
    h("tr", { "data-node": name }, h("td", {}, name), h("td", {}, badge(n.status)), h("td", {}, n.queue),
      h("td", {}, (n.depends_on || []).join(", ")), h("td", { class: "num" }, `${n.attempts}/${n.max_attempts}`),
      h("td", { class: "mono" }, link(`#/jobs/${seg(n.id)}`, n.id))));
  show(
    h("div", { class: "toolbar" }, h("h1", {}, "DAG ", dag.name, " ", h("span", { class: "mono muted" }, dag.id)),
      badge(dag.status), h("span", { class: "spacer" }), buttons, refreshButton()),
    h("div", { class: "legend" }, present.map((st) => h("span", {}, badge(st), ` ${dag.counts[st]}`))),
    dagGraph(dag.nodes),
    h("div", { class: "card" }, fields([["on failure", dag.on_failure], ["parent results", dag.parent_results],
      ["run at", when(dag.run_at)], ["created at", when(dag.created_at)], ["finished at", when(dag.finished_at)]])),
    h("h2", {}, "Nodes"),
    table([{ title: "node" }, { title: "status" }, { title: "queue" }, { title: "depends on" },
      { title: "attempts", num: true }, { title: "job" }], rows, { id: "dag-nodes" }),
  );
}

// -- a queue's listings: schedules, DAGs, jobs by status --------------------------------------

// The cursors of the pages seen so far of one listing: "Previous" goes back along them.
const listingPaging = { listing: null, cursors: [null] };

// One page of a listing (`path` with `query`), as a table with Previous and Next.
async function listingPage(title, key, path, query, columns, row, extra) {
  if (listingPaging.listing !== key) Object.assign(listingPaging, { listing: key, cursors: [null] });
  const cursor = listingPaging.cursors[listingPaging.cursors.length - 1];
  const page = await api("GET", path, { query: { ...query, limit: PAGE_SIZE, cursor } });
  const pageNumber = listingPaging.cursors.length;
  const previous = h("button", { type: "button", disabled: pageNumber === 1 }, "Previous");
  previous.addEventListener("click", () => {
    listingPaging.cursors.pop();
    act(previous, async () => null);
  });
  const next = h("button", { type: "button", disabled: !page.next_cursor, "data-action": "next" }, "Next");
  next.addEventListener("click", () => {
    listingPaging.cursors.push(page.next_cursor);
    act(next, async () => null);
  });
  show(
    h("div", { class: "toolbar" }, h("h1", {}, title), h("span", { class: "spacer" }), refreshButton()),
    extra ? extra(page) : null,
    page.items.length
      ? table(columns, page.items.map(row), { id: "listing" })
      : h("p", { id: "listing-empty", class: "card" }, "Nothing on this page."),
    h("div", { class: "toolbar" }, previous, h("span", { class: "muted" }, `page ${pageNumber}`), next),
  );
}

function queueSchedulesPage(queue) {
  const columns = [{ title: "schedule" }, { title: "name" }, { title: "every" }, { title: "state" },
    { title: "created" }];
  const row = (schedule) => h("tr", { "data-schedule": schedule.id },
    h("td", { class: "mono" }, link(`#/schedules/${seg(schedule.id)}`, schedule.id)),
    h("td", {}, schedule.name ?? ""),
    h("td", {}, `${schedule.cron || schedule.rate}${schedule.timezone === "UTC" ? "" : ` (${schedule.timezone})`}`),
    h("td", { "data-state": schedule.state }, schedule.state),
    h("td", { class: "mono" }, when(schedule.created_at)));
  return listingPage(`Schedules of ${queue}`, `schedules|${queue}`, "/schedules", { queue },
    columns, row);
}

function queueDagsPage(queue) {
  const columns = [{ title: "DAG" }, { title: "name" }, { title: "status" }, { title: "run at" },
    { title: "queues" }, { title: "nodes" }];
  const row = (dag) => h("tr", { "data-dag": dag.id },
    h("td", { class: "mono" }, link(`#/dags/${seg(dag.id)}`, dag.id)),
    h("td", {}, dag.name),
    h("td", {}, badge(dag.status)),
    h("td", { class: "mono" }, when(dag.run_at)),
    h("td", {}, dag.queues.join(" ")),
    h("td", {}, Object.entries(dag.counts).map(([status, n]) => `${n} ${status}`).join(", ")));
  return listingPage(`DAGs of ${queue}`, `dags|${queue}`, "/dags", { queue }, columns, row);
}

function queueJobsPage(queue, status) {
  const dead = status === "dead";
  const columns = dead
    ? [{ title: "job" }, { title: "dead at" }, { title: "attempt", num: true }, { title: "error type" }]
    : [{ title: "job" }, { title: "run at" }, { title: "priority" }, { title: "attempts", num: true }];
  const row = (job) => h("tr", { "data-job": job.id },
    h("td", { class: "mono" }, link(`#/jobs/${seg(job.id)}`, job.id)),
    h("td", { class: "mono" }, when(dead ? job.dead_at : job.run_at)),
    h("td", { class: dead ? "num" : null }, (dead ? job.attempts : job.priority) ?? ""),
    h("td", { class: dead ? null : "num" }, (dead ? job.error_type : job.attempts) ?? ""));
  const picker = h("select", { id: "job-status", "aria-label": "status" },
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)));
  picker.addEventListener("change", () => {
    location.hash = `#/queue-jobs/${seg(queue)}?status=${encodeURIComponent(picker.value)}`;
  });
  const windowNote = (page) => h("p", { class: "muted" }, picker, " ",
    `${dead ? "died" : "due"} from ${when(page.window_from)} to ${when(page.window_to)}, `,
    dead ? "from the dead-letter index." : "in due order. Each page reads every job due in the "
      + "window, of any queue: a page may be short before the end.");
  return listingPage(`${status} jobs of ${queue}`, `jobs|${queue}|${status}`,
    `/queues/${seg(queue)}/jobs`, { status }, columns, row, windowNote);
}

// -- routing --------------------------------------------------------------------------------

async function route() {
  const [hashPath, hashQuery] = (location.hash.slice(1) || "/queues").split("?");
  const parts = hashPath.split("/").filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(hashQuery || "");
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("current", a.dataset.nav === parts[0]);
  }
  const [page, id] = parts;
  if (page === "dead" && id) return deadPage(id, Number(query.get("limit")) || PAGE_SIZE);
  if (page === "jobs" && id) return jobPage(id);
  if (page === "schedules" && id) return schedulePage(id, query.get("before"));
  if (page === "dags" && id) return dagPage(id);
  if (page === "queue-schedules" && id) return queueSchedulesPage(id);
  if (page === "queue-dags" && id) return queueDagsPage(id);
  if (page === "queue-jobs" && id) return queueJobsPage(id, query.get("status") || "pending");
  return queuesPage();
}

async function navigate() {
  clearMessages();
  show(h("p", { class: "muted" }, "Loading…"));
  try {
    await route();
  } catch (error) {
    show();
    showError(error);
  }
  document.body.dataset.ready = location.hash || "#/queues";
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("lookup").addEventListener("submit", (event) => {
    event.preventDefault();
    const kind = document.getElementById("lookup-kind").value;
    const id = document.getElementById("lookup-id").value.trim();
    if (id) location.hash = `#/${kind}/${encodeURIComponent(id)}`;
  });
  window.addEventListener("hashchange", navigate);
  navigate();
});
