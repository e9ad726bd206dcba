// The admin UI's foundations: the API, building the page, messages, and actions.
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

// The one way content goes into the page. A child is a node, a text, or a list of children
// (nested to any depth); null, undefined and false are nothing. The DOM's own append and
// replaceChildren would write a list as "[object HTMLHeadingElement],…" and null as "null".
function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    if (child instanceof Node) node.append(child);
    else if (typeof child === "object") node.append(JSON.stringify(child));
    else node.append(String(child));
  }
  return node;
}

function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

const main = () => document.getElementById("main");

function show(...nodes) {
  fill(main(), nodes);
}

function badge(status) {
  return h("span", { class: `badge s-${status}`, "data-status": status }, status);
}

// A JSON value as indented text; null (no payload, no result) as a word instead.
function jsonBlock(value, empty = "none") {
  if (value === null || value === undefined) return h("p", { class: "muted json-empty" }, empty);
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

function fields(pairs) {
  const list = h("dl", { class: "fields" });
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    append(list, [h("dt", {}, name), h("dd", { "data-field": name }, value)]);
  }
  return list;
}

// A table in a box of its own: wider than the window, it scrolls inside the box, never the page.
function table(columns, rows, attrs = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  return h("div", { class: "scroll" },
    h("table", attrs, h("thead", {}, head), h("tbody", {}, rows)));
}

const when = (text) => (text ? text.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "");
const link = (href, text) => h("a", { href }, text);

// -- errors, notices, progress and toasts ---------------------------------------------------

// The API's message as it words it; a field error is listed only when the message does not
// already say it (a refused request's message names each field and reason itself).
function errorText(error) {
  const status = error.status ? ` (${error.status})` : "";
  return `Error${status}: ${error.message}`;
}

function showError(error) {
  const box = document.getElementById("error");
  const unsaid = (error.errors || []).filter((e) => !error.message.includes(`${e.field}: ${e.reason}`));
  fill(box, h("strong", {}, errorText(error)),
    unsaid.length ? h("ul", {}, unsaid.map((e) => h("li", {}, h("b", {}, e.field), `: ${e.reason}`))) : null);
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

// A result that arrived after its page was left: a toast in the corner, naming what it was
// about, for a while (the page now shown is not the one it belongs to).
function toast(text, failed) {
  const box = h("div", { class: failed ? "toast failed" : "toast", role: "status" },
    h("span", { class: "toast-text" }, text),
    h("button", { type: "button", class: "close", "aria-label": "dismiss" }, "×"));
  box.querySelector("button").addEventListener("click", () => box.remove());
  document.getElementById("toasts").append(box);
  setTimeout(() => box.remove(), 15000);
}

// What is in progress, shown while it lasts: "Pause schedule X: working… 4 s".
function startProgress(title) {
  const box = document.getElementById("progress");
  const started = Date.now();
  const render = () => {
    const seconds = Math.floor((Date.now() - started) / 1000);
    box.textContent = `${title}: working…${seconds ? ` ${seconds} s` : ""}`;
  };
  render();
  box.hidden = false;
  const timer = setInterval(render, 1000);
  return () => {
    clearInterval(timer);
    box.hidden = true;
  };
}

// -- actions ----------------------------------------------------------------------------------

// Which visit of a page is shown: every navigation makes a new one. An action, a page's load
// or a refresh finishing after its visit ended must not write into the page now shown.
// `busy`: actions running; `touched`: a field of the page was typed in (auto-refresh waits).
const visits = { current: 0, busy: 0, touched: false };

// Runs an action from a button: the button says it is busy and the progress line what is
// going on; then, on the page it was started on, the page is rendered again (so what it shows
// is the API's state after the action) and the result noticed. If that page was left
// meanwhile, the result is a toast naming what it was about. `title` names the action and its
// item ("Pause schedule X"); `action` returns the notice to show, or null.
async function act(button, action, title) {
  const visit = visits.current;
  const name = title || button.textContent;
  clearMessages();
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  visits.busy += 1;
  const stop = startProgress(name);
  let message = null, failure = null;
  try {
    message = await action();
  } catch (error) {
    failure = error;
  }
  stop();
  visits.busy -= 1;
  if (visit !== visits.current) {
    if (failure) toast(`${name} failed: ${errorText(failure)}`, true);
    else toast(message || `${name}: done`, false);
    return;
  }
  button.removeAttribute("aria-busy");
  button.disabled = false;
  if (failure) {
    showError(failure);
    return;
  }
  await render(visit);
  if (visit !== visits.current) return;
  visits.touched = false; // the page was rendered anew: nothing typed is left in it
  if (message) notify(message);
}

function actionButton(label, action, attrs = {}, title = null) {
  const button = h("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", () => act(button, action, title));
  return button;
}

// A button that POSTs to `path` (pause, resume, retry), then shows `done`.
function postButton(label, path, done, attrs, title) {
  return actionButton(label, async () => {
    await api("POST", path);
    return done;
  }, attrs, title);
}
