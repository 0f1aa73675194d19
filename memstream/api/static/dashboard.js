/* memstream dashboard: the pipeline panel (/dashboard/pipeline, refreshed every few seconds)
   and the tenant's figures from /v1/stats with its API key (kept in sessionStorage). The tenant
   comes from ?tenant=, the session, or in open mode the most recently active tenant. */
"use strict";

const COLORS = ["#3b5bdb", "#0ca678", "#f08c00", "#ae3ec9", "#e03131", "#1098ad"];
// ``refused``: the key the pipeline view answered 403 to (a tenant's key, not an operator's).
const state = { tenant: "", key: "", cube: null, refused: null };
const charts = {};
const data = {};
window.dashboard = { charts, data, state, ready: false, loads: 0, pipelineLoads: 0 };
const PIPELINE_EVERY_MS = 5000;

const $ = (id) => document.getElementById(id);

function showError(message) {
  const el = $("error");
  el.textContent = message;
  el.hidden = !message;
}

async function api(path, params) {
  const query = new URLSearchParams({ tenant_id: state.tenant, ...params });
  const headers = state.key ? { Authorization: `Bearer ${state.key}` } : {};
  const response = await fetch(`${path}?${query}`, { headers });
  const body = await response.json();
  if (!response.ok) {
    const err = body && body.error ? `${body.error.code}: ${body.error.message}` : response.status;
    throw new Error(`${path}: ${err}`);
  }
  return body;
}

function utcInput(date) {
  return date.toISOString().slice(0, 16);
}

function rangeParams() {
  const params = { bucket: $("bucket").value };
  if ($("from").value) params.from = `${$("from").value}:00Z`;
  if ($("to").value) params.to = `${$("to").value}:00Z`;
  return params;
}

function label(iso, bucket) {
  return bucket === "day" ? iso.slice(0, 10) : iso.slice(5, 16).replace("T", " ");
}

function draw(name, config) {
  if (charts[name]) charts[name].destroy();
  config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options);
  charts[name] = new Chart($(`${name}-chart`), config);
}

function fillTable(id, rows) {
  const body = $(id).querySelector("tbody");
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    row.cells.forEach((cell, i) => {
      const td = document.createElement("td");
      td.textContent = String(cell);
      if (row.className) td.className = row.className;
      if (row.numeric && row.numeric.includes(i)) td.className = "num";
      tr.appendChild(td);
    });
    if (row.trClass) tr.className = row.trClass;
    if (row.onclick) tr.addEventListener("click", row.onclick);
    if (row.key) tr.dataset.key = row.key;
    body.appendChild(tr);
  }
}

function renderOverview(o) {
  $("messages").textContent = o.messages.toLocaleString("en");
  $("conversations").textContent = o.conversations.toLocaleString("en");
  $("memories").textContent = o.memories.total.toLocaleString("en");
  const types = Object.keys(o.memories.by_type);
  draw("types", {
    type: "doughnut",
    data: { labels: types, datasets: [{ data: types.map((t) => o.memories.by_type[t]), backgroundColor: COLORS }] },
    options: { plugins: { legend: { position: "right" } } },
  });
  fillTable("agents", o.top_agents.map((a) => ({ cells: [a.agent_id, a.memories] })));
  fillTable(
    "cubes",
    Object.entries(o.memories.by_cube).map(([cube, n]) => ({ key: cube, cells: [cube, n], onclick: () => loadCube(cube) })),
  );
}

function renderTrends(t) {
  const labels = t.buckets.map((b) => label(b, t.bucket));
  const datasets = Object.keys(t.memories).map((type, i) => ({
    type: "bar", label: `memories: ${type}`, data: t.memories[type], backgroundColor: COLORS[i % COLORS.length], stack: "memories", yAxisID: "y",
  }));
  datasets.push({ type: "line", label: "messages", data: t.messages, borderColor: "#495057", backgroundColor: "#495057", yAxisID: "y1", pointRadius: 2 });
  draw("trends", {
    type: "bar",
    data: { labels, datasets },
    options: {
      scales: {
        x: { stacked: true },
        y: { stacked: true, beginAtZero: true, title: { display: true, text: "memories" } },
        y1: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "messages" } },
      },
    },
  });
}

function renderSearch(s) {
  $("searches").textContent = s.total.searches.toLocaleString("en");
  draw("search", {
    type: "bar",
    data: {
      labels: s.buckets.map((b) => label(b, s.bucket)),
      datasets: [
        { type: "bar", label: "searches", data: s.searches, backgroundColor: "#3b5bdb", yAxisID: "y" },
        { type: "bar", label: "hits", data: s.hits, backgroundColor: "#0ca678", yAxisID: "y" },
        { type: "line", label: "p50 ms", data: s.p50_ms, borderColor: "#f08c00", backgroundColor: "#f08c00", yAxisID: "y1", spanGaps: true },
        { type: "line", label: "p99 ms", data: s.p99_ms, borderColor: "#e03131", backgroundColor: "#e03131", yAxisID: "y1", spanGaps: true },
      ],
    },
    options: {
      scales: {
        y: { beginAtZero: true, title: { display: true, text: "count" } },
        y1: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "ms" } },
      },
    },
  });
}

function renderCube(c) {
  $("cube-title").textContent = `Cube ${c.cube_id}: ${c.total} live memories, by importance`;
  $("cube-types").textContent = Object.entries(c.by_type).map(([t, n]) => `${t}: ${n}`).join(" · ");
  draw("cube", {
    type: "bar",
    data: { labels: c.importance.map((_, i) => String(i + 1)), datasets: [{ label: "memories", data: c.importance, backgroundColor: "#ae3ec9" }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
  });
  fillTable(
    "newest",
    c.newest.map((m) => ({
      key: m.id,
      cells: [m.created_at.slice(0, 19).replace("T", " "), m.memory_type, m.importance, m.user_id, m.content],
      onclick: () => loadHistory(m.id),
    })),
  );
  for (const tr of $("cubes").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.key === c.cube_id);
}

function cause(step) {
  if (!step) return "";
  return `${step.cause}${step.conversation_id ? ` (${step.conversation_id})` : ""}`;
}

function renderHistory(h) {
  $("history-panel").hidden = false;
  const n = h.items.length;
  $("history-title").textContent = `History of memory ${h.memory_id}: ${n} ${n === 1 ? "memory" : "memories"}, oldest first`;
  fillTable(
    "history",
    h.items.map((m) => ({
      key: m.id,
      trClass: m.id === h.memory_id ? "selected" : "",
      cells: [
        m.created_at.slice(0, 19).replace("T", " "),
        m.state,
        cause(m.added),
        m.ended ? `${m.ended.change}: ${cause(m.ended)}` : "",
        m.content,
        m.source_messages.map((s) => `${s.role}: ${s.content}`).join(" | "),
      ],
    })),
  );
}

async function loadHistory(id) {
  window.dashboard.ready = false;
  showError("");
  try {
    data.history = await api(`/v1/memories/${encodeURIComponent(id)}/history`, {});
    renderHistory(data.history);
  } catch (e) {
    showError(e.message);
  }
  window.dashboard.ready = true;
}

function percent(share) {
  return share === null || share === undefined ? "–" : `${(100 * share).toFixed(share > 0 && share < 0.01 ? 2 : 1)}%`;
}

function perSecond(rate) {
  return rate === null || rate === undefined ? "–" : rate.toFixed(rate < 10 ? 1 : 0);
}

function renderPipeline(p) {
  const w = p.workers;
  $("pipeline-group").textContent = w.members
    ? `${w.members} worker${w.members === 1 ? "" : "s"}: ${w.groups.map((g) => `${g.group} (${g.members}, ${g.state})`).join(", ")}`
    : "no worker is running";
  fillTable(
    "stages",
    p.stages.map((s) => ({
      key: s.stage, cells: [s.stage, s.topic, s.lag.toLocaleString("en"), perSecond(s.per_second)], numeric: [2, 3], trClass: s.lag > 0 ? "behind" : "",
    })),
  );
  $("retries-pending").textContent = p.retries_pending.toLocaleString("en");
  $("dead-total").textContent = p.dead_letters.total.toLocaleString("en");
  const reasons = Object.entries(p.dead_letters.by_reason);
  $("dead-newest").textContent = p.dead_letters.total > p.dead_letters.newest ? `(the newest ${p.dead_letters.newest})` : "";
  fillTable("dead-reasons", reasons.length ? reasons.map(([r, n]) => ({ key: r, cells: [r, n], numeric: [1] })) : [{ cells: ["none", ""] }]);
  const e = p.errors;
  $("llm-rate").textContent = percent(e.llm.error_rate);
  $("llm-calls").textContent = `(${e.llm.failures} of ${e.llm.calls})`;
  const providers = Object.entries(e.providers);
  fillTable(
    "providers",
    providers.length
      ? providers.map(([name, c]) => ({ key: name, cells: [name, c.calls, c.failures, percent(c.error_rate)], numeric: [1, 2, 3] }))
      : [{ cells: ["no calls yet", "", "", ""] }],
  );
  const span = e.window_seconds === null ? "since the processes started" : `in the last ${Math.round(e.window_seconds)} s`;
  $("errors-window").textContent = `(${span}; ${e.workers_scraped} of ${e.workers} workers' metrics read)`;
}

async function loadPipeline() {
  const headers = state.key ? { Authorization: `Bearer ${state.key}` } : {};
  const el = $("pipeline-error");
  if (state.refused === state.key) return;
  try {
    const response = await fetch("/dashboard/pipeline", { headers });
    const body = await response.json();
    const grid = document.querySelector("#pipeline .pipeline");
    grid.hidden = response.status === 403;
    if (response.status === 403) {
      // Not asked again with this key: the panel covers every tenant, a tenant's key never will.
      state.refused = state.key;
      el.textContent = "The pipeline covers every tenant: it needs an operator key.";
      el.hidden = false;
      return;
    }
    if (!response.ok) {
      const err = body && body.error ? `${body.error.code}: ${body.error.message}` : response.status;
      throw new Error(`pipeline: ${err}`);
    }
    data.pipeline = body;
    renderPipeline(body);
    el.hidden = true;
  } catch (e) {
    el.textContent = e.message;
    el.hidden = false;
  } finally {
    window.dashboard.pipelineLoads += 1;
  }
}

function showHint(message) {
  const el = $("hint");
  el.textContent = message;
  el.hidden = !message;
}

/* In open mode, the tenants with data (the most recently active first); else a hint. */
async function suggestTenants() {
  try {
    const found = await (await fetch("/dashboard/tenants")).json();
    $("tenants").replaceChildren(...found.tenants.map((t) => Object.assign(document.createElement("option"), { value: t })));
    if (!found.open) return { open: false, hint: "Enter your tenant and its API key." };
    if (!found.tenants.length) return { open: true, hint: "No tenant has messages yet: publish some (memstream publish), then reload." };
    return { open: true, tenant: found.tenants[0] };
  } catch (e) {
    return { open: false, hint: "Enter a tenant." };
  }
}

async function loadCube(cube) {
  state.cube = cube;
  try {
    data.cube = await api(`/v1/stats/cubes/${encodeURIComponent(cube)}`, {});
    renderCube(data.cube);
  } catch (e) {
    showError(e.message);
  }
}

async function loadRange() {
  const params = rangeParams();
  const [trends, search] = await Promise.all([api("/v1/stats/trends", params), api("/v1/stats/search-trends", params)]);
  data.trends = trends;
  data.search = search;
  renderTrends(trends);
  renderSearch(search);
}

async function loadAll() {
  window.dashboard.ready = false;
  showError("");
  try {
    data.overview = await api("/v1/stats/overview", {});
    renderOverview(data.overview);
    await loadRange();
    const cubes = Object.keys(data.overview.memories.by_cube);
    const cube = cubes.includes(state.cube) ? state.cube : cubes[0];
    if (cube) await loadCube(cube);
  } catch (e) {
    showError(e.message);
  }
  window.dashboard.loads += 1;
  window.dashboard.ready = true;
}

function connect(tenant, key) {
  state.tenant = tenant;
  state.key = key;
  sessionStorage.setItem("memstream.tenant", state.tenant);
  sessionStorage.setItem("memstream.key", state.key);
  const url = new URL(window.location.href);
  url.searchParams.set("tenant", state.tenant);
  window.history.replaceState(null, "", url);
  $("tenant-title").textContent = `Tenant ${state.tenant}`;
  showHint("");
  loadAll();
  loadPipeline();
}

async function init() {
  const fromUrl = new URLSearchParams(window.location.search).get("tenant");
  state.tenant = fromUrl || sessionStorage.getItem("memstream.tenant") || "";
  state.key = sessionStorage.getItem("memstream.key") || "";
  const now = new Date();
  now.setUTCMinutes(0, 0, 0);
  $("to").value = utcInput(new Date(now.getTime() + 3600e3));
  $("from").value = utcInput(new Date(now.getTime() - 23 * 3600e3));
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    connect($("tenant").value.trim(), $("apikey").value.trim());
  });
  $("range").addEventListener("submit", async (event) => {
    event.preventDefault();
    window.dashboard.ready = false;
    showError("");
    try {
      await loadRange();
    } catch (e) {
      showError(e.message);
    }
    window.dashboard.loads += 1;
    window.dashboard.ready = true;
  });
  const suggested = await suggestTenants();
  if (!state.tenant && suggested.tenant) state.tenant = suggested.tenant;
  $("tenant").value = state.tenant;
  $("apikey").value = state.key;
  setInterval(() => { if (suggested.open || state.key) loadPipeline(); }, PIPELINE_EVERY_MS);
  if (state.tenant && (suggested.open || state.key)) connect(state.tenant, state.key);
  else {
    showHint(suggested.hint || "Enter the API key of this tenant.");
    if (suggested.open) loadPipeline();
  }
}

init();
