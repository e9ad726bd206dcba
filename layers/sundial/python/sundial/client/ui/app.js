// The Sundial admin UI: vanilla JavaScript, no dependencies, no build step. This file routes
// and refreshes; dom.js builds the page and runs actions; pages.js, jobs.js and lists.js are
// the pages.
// Pages by URL hash: #/queues, #/dead/QUEUE[?limit=N], #/jobs/ID, #/schedules/ID, #/dags/ID;
// a queue's listings: #/queue-schedules/QUEUE, #/queue-dags/QUEUE, #/queue-jobs/QUEUE?status=S.
"use strict";

// -- routing --------------------------------------------------------------------------------

// What the current hash shows (a promise of the page's content).
function pageFor() {
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

// Renders the page again for `visit`, if that visit is still the one shown (a page that
// answers after the person moved on is dropped). An API error is shown in the banner.
async function render(visit) {
  try {
    const content = await pageFor();
    if (visit === visits.current) show(content);
  } catch (error) {
    if (visit === visits.current) showError(error);
  }
}

async function navigate() {
  visits.current += 1;
  const visit = visits.current;
  visits.touched = false;
  clearMessages();
  show(h("p", { class: "muted" }, "Loading…"));
  try {
    const content = await pageFor();
    if (visit !== visits.current) return;
    show(content);
  } catch (error) {
    if (visit !== visits.current) return;
    show();
    showError(error);
  }
  document.body.dataset.ready = location.hash || "#/queues";
}

// -- auto-refresh ---------------------------------------------------------------------------

// Off by default; on, every page is read again every few seconds, remembered across pages and
// visits (localStorage). A refresh never takes what a person is doing: it waits while an
// action runs, while a field of the page has focus or was typed in, and while a form is open;
// and it keeps the scroll position.
const REFRESH_KEY = "sundial.autoRefresh";
const REFRESH_CHOICES = [2, 5, 10, 30, 60];
const refreshing = { timer: null, count: 0, skipped: 0 };

function refreshSetting() {
  try {
    const saved = JSON.parse(localStorage.getItem(REFRESH_KEY) || "{}");
    const every = REFRESH_CHOICES.includes(saved.every) ? saved.every : 10;
    return { on: saved.on === true, every };
  } catch {
    return { on: false, every: 10 };
  }
}

function saveRefreshSetting(setting) {
  localStorage.setItem(REFRESH_KEY, JSON.stringify(setting));
  scheduleRefresh(setting);
}

function scheduleRefresh(setting) {
  clearInterval(refreshing.timer);
  refreshing.timer = setting.on ? setInterval(refreshTick, setting.every * 1000) : null;
}

function pageInUse() {
  const focused = document.activeElement;
  const typing = focused && main().contains(focused) && focused.matches("input, select, textarea");
  return typing || visits.touched || visits.busy > 0 || main().querySelector("details[open]") !== null;
}

async function refreshTick() {
  if (document.hidden || !document.body.dataset.ready) return;
  if (pageInUse()) {
    refreshing.skipped += 1;
    document.body.dataset.refreshSkipped = String(refreshing.skipped);
    return;
  }
  const visit = visits.current;
  const [x, y] = [window.scrollX, window.scrollY];
  try {
    const content = await pageFor();
    if (visit !== visits.current || pageInUse()) return;
    show(content);
    window.scrollTo(x, y);
    document.getElementById("error").hidden = true;
  } catch (error) {
    if (visit === visits.current) showError(error);
  }
  refreshing.count += 1;
  document.body.dataset.refreshes = String(refreshing.count);
}

function refreshControls() {
  const setting = refreshSetting();
  document.body.dataset.refreshes = "0";
  document.body.dataset.refreshSkipped = "0";
  const toggle = document.getElementById("auto-refresh");
  const every = document.getElementById("refresh-every");
  fill(every, REFRESH_CHOICES.map((n) => h("option", { value: n, selected: n === setting.every }, `${n} s`)));
  toggle.checked = setting.on;
  every.disabled = !setting.on;
  const changed = () => {
    every.disabled = !toggle.checked;
    saveRefreshSetting({ on: toggle.checked, every: Number(every.value) });
  };
  toggle.addEventListener("change", changed);
  every.addEventListener("change", changed);
  scheduleRefresh(setting);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("lookup").addEventListener("submit", (event) => {
    event.preventDefault();
    const kind = document.getElementById("lookup-kind").value;
    const id = document.getElementById("lookup-id").value.trim();
    if (id) location.hash = `#/${kind}/${encodeURIComponent(id)}`;
  });
  main().addEventListener("input", () => {
    visits.touched = true;
  });
  refreshControls();
  window.addEventListener("hashchange", navigate);
  navigate();
});
