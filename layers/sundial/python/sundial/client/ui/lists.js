// The admin UI's pages of a DAG (drawn by depth) and of a queue's listings (schedules, DAGs,
// jobs by status).
"use strict";

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
  // A graph wider than the window scrolls inside its box; the page itself never does.
  return h("div", { class: "scroll graph" }, svg);
}

async function dagPage(id) {
  const path = `/dags/${seg(id)}`;
  const dag = await api("GET", path);
  const name = `DAG ${dag.name}`;
  const buttons = [];
  if (dag.status === "running") {
    buttons.push(postButton("Pause", `${path}/pause`, `${name} paused`, { "data-action": "pause" }, `Pause ${name}`));
  }
  if (dag.status === "paused") {
    buttons.push(postButton("Resume", `${path}/resume`, `${name} resumed`, { "data-action": "resume" }, `Resume ${name}`));
  }
  if (dag.status === "running" || dag.status === "paused") {
    buttons.push(actionButton("Cancel", async () => {
      if (!confirm(`Cancel every unfinished node of ${dag.name}?`)) return null;
      await api("DELETE", path);
      return `${name} cancelled`;
    }, { class: "danger", "data-action": "cancel" }, `Cancel ${name}`));
  }
  const present = STATUSES.filter((st) => dag.counts[st]);
  const rows = Object.entries(dag.nodes).sort(([a], [b]) => a.localeCompare(b)).map(([node, n]) =>
    h("tr", { "data-node": node }, h("td", {}, node), h("td", {}, badge(n.status)), h("td", {}, n.queue),
      h("td", {}, (n.depends_on || []).join(", ") || "–"), h("td", { class: "num" }, `${n.attempts}/${n.max_attempts}`),
      h("td", { class: "mono" }, link(`#/jobs/${seg(n.id)}`, n.id))));
  return [
    toolbar(h("h1", {}, "DAG ", dag.name, " ", h("span", { class: "mono muted" }, dag.id)),
      badge(dag.status), h("span", { class: "spacer" }), buttons, refreshButton()),
    h("div", { class: "legend" }, present.map((st) => h("span", {}, badge(st), ` ${dag.counts[st]}`))),
    dagGraph(dag.nodes),
    h("div", { class: "card" }, fields([["on failure", dag.on_failure], ["parent results", dag.parent_results],
      ["run at", when(dag.run_at)], ["created at", when(dag.created_at)], ["finished at", when(dag.finished_at)]])),
    h("h2", {}, "Nodes"),
    table([{ title: "node" }, { title: "status" }, { title: "queue" }, { title: "depends on" },
      { title: "attempts", num: true }, { title: "job" }], rows, { id: "dag-nodes" }),
  ];
}

// -- a queue's listings: schedules, DAGs, jobs by status --------------------------------------

const listingPaging = { listing: null, cursors: [null] };

// One page of a listing (`path` with `query`), as a table with Previous and Next.
async function listingPage(title, key, path, query, columns, row, extra) {
  if (listingPaging.listing !== key) Object.assign(listingPaging, { listing: key, cursors: [null] });
  const cursor = listingPaging.cursors[listingPaging.cursors.length - 1];
  const page = await api("GET", path, { query: { ...query, limit: PAGE_SIZE, cursor } });
  return [
    toolbar(h("h1", {}, title), h("span", { class: "spacer" }), refreshButton()),
    extra ? extra(page) : null,
    page.items.length
      ? table(columns, page.items.map(row), { id: "listing" })
      : h("p", { id: "listing-empty", class: "card" }, "Nothing on this page."),
    pager(listingPaging, page),
  ];
}

function queueSchedulesPage(queue) {
  const columns = [{ title: "schedule" }, { title: "name" }, { title: "every" }, { title: "state" },
    { title: "created" }];
  const row = (schedule) => h("tr", { "data-schedule": schedule.id },
    h("td", { class: "mono" }, link(`#/schedules/${seg(schedule.id)}`, schedule.id)),
    h("td", {}, schedule.name ?? "–"),
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
    h("td", { class: dead ? "num" : null }, (dead ? job.attempts : job.priority) ?? "–"),
    h("td", { class: dead ? null : "num" }, (dead ? job.error_type : job.attempts) ?? "–"));
  const picker = h("select", { id: "job-status", "aria-label": "status" },
    STATUSES.map((st) => h("option", { value: st, selected: st === status }, st)));
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
