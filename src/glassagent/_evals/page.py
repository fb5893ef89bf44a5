"""The style and the script of the HTML report (see `glassagent._evals.html`).

The script only moves, shows and hides what the page already holds: it sorts the cases when a
column's head is clicked, filters them by name, tag and status, and opens a case's attempts.
It reads no data but the page's own attributes and writes no markup. The comparison page
uses it too, with the controls it has.
"""

CSS = """
:root{--fg:#1f2328;--dim:#59636e;--bg:#fff;--line:#d1d9e0;--panel:#f6f8fa;--pass:#1a7f37;
--fail:#cf222e;--partial:#bf8700;--accent:#0969da;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--dim:#9198a1;--bg:#0d1117;
--line:#3d444d;--panel:#151b23;--pass:#3fb950;--fail:#f85149;--partial:#d29922;
--accent:#4493f8}}
*{box-sizing:border-box}
body{margin:0;padding:20px 28px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:0 0 4px}
.dim{color:var(--dim);font-size:12px}
.facts{color:var(--dim)}
header{margin-bottom:16px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(128px,1fr));gap:10px;
margin-bottom:18px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 12px;background:var(--panel)}
.card .label{font-size:12px;color:var(--dim);text-transform:uppercase;letter-spacing:.03em}
.card .value{font-size:18px;font-weight:600;margin:2px 0;overflow-wrap:anywhere}
.card[data-card=Model] .value{font-size:14px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px;
margin-bottom:18px}
figure{margin:0;border:1px solid var(--line);border-radius:8px;padding:8px 10px}
figcaption{font-weight:600;margin-bottom:4px}
svg{width:100%;height:auto;display:block}
svg .grid{stroke:var(--line);stroke-width:1}
svg .tick{fill:var(--dim);font-size:13px}
svg .empty{fill:var(--dim);font-size:16px}
svg .bar{cursor:pointer}
svg .bar.pass{fill:var(--pass)}
svg .bar.fail{fill:var(--fail)}
svg .bar.partial{fill:var(--partial)}
svg .bin{fill:var(--accent)}
svg .mark{stroke:var(--fg);stroke-dasharray:4 3;stroke-width:1}
svg .marklabel{fill:var(--fg);font-size:13px;paint-order:stroke;stroke:var(--bg);
stroke-width:3px}
.controls{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
.controls input,.controls select,.controls button{font:inherit;padding:2px 6px}
table{border-collapse:collapse;width:100%}
#cases>thead th{position:sticky;top:0;background:var(--bg);border-bottom:2px solid var(--line);
text-align:left;white-space:nowrap}
#cases>thead th button{all:unset;cursor:pointer;padding:4px 6px;display:block}
#cases>thead th[aria-sort=ascending] .arrow::after{content:" ▲"}
#cases>thead th[aria-sort=descending] .arrow::after{content:" ▼"}
#cases td{padding:4px 6px;border-bottom:1px solid var(--line);vertical-align:top}
#cases td[data-key=name]{overflow-wrap:anywhere}
tr.case-row{cursor:pointer}
tr.case-row:hover{background:var(--panel)}
tr.case-row.fail td:first-child{box-shadow:inset 3px 0 var(--fail)}
tr.case-row.partial td:first-child{box-shadow:inset 3px 0 var(--partial)}
tr.case-row.pass td:first-child{box-shadow:inset 3px 0 var(--pass)}
tr.detail>td{background:var(--panel);padding:8px 12px}
button.toggle{all:unset;cursor:pointer;display:inline-block;width:1em}
button.toggle[aria-expanded=true]{transform:rotate(90deg)}
.tag{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;
border:1px solid var(--line);color:var(--dim)}
.badge{display:inline-block;font-size:12px;padding:0 7px;border-radius:8px;color:#fff}
.badge.pass{background:var(--pass)}
.badge.fail,.badge.error{background:var(--fail)}
.badge.partial{background:var(--partial)}
.attempt{border-left:3px solid var(--pass);padding:4px 0 4px 10px;margin:6px 0}
.attempt.fail{border-left-color:var(--fail)}
.attempt .label{font-size:12px;color:var(--dim);margin-top:4px}
pre{margin:2px 0;padding:6px 8px;background:var(--bg);border:1px solid var(--line);
border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;max-height:24em;
overflow:auto}
pre.error{color:var(--fail)}
table.scores{margin-top:6px;font-size:13px}
table.scores th,table.scores td{border-bottom:1px solid var(--line);padding:2px 8px;
text-align:left;vertical-align:top}
table.scores td.reason{white-space:pre-wrap;overflow-wrap:anywhere}
table.scores tr.fail td:nth-child(3){color:var(--fail)}
table.scores tr.pass td:nth-child(3){color:var(--pass)}
a.events{margin-left:8px;color:var(--accent)}
.badge.improved{background:var(--pass)}
.badge.regressed{background:var(--fail)}
.badge.unchanged,.badge.added,.badge.removed{background:var(--dim)}
.delta.up{color:var(--pass)}
.delta.down{color:var(--fail)}
""".strip()

SCRIPT = """
(() => {
  "use strict";
  const table = document.getElementById("cases");
  const heads = Array.from(table.tHead.querySelectorAll("th[data-key]"));
  const find = document.getElementById("find");
  const tag = document.getElementById("tag");
  const status = document.getElementById("status");
  const shown = document.getElementById("shown");
  const total = Number(table.dataset.total);
  if (!table) return;
  let sorted = null;
  let direction = 1;

  const cases = () => Array.from(table.tBodies);
  const order = (body) => Number(body.dataset.index);

  function value(body, key, numeric) {
    const cell = body.rows[0].querySelector(`td[data-key="${key}"]`);
    const raw = cell ? cell.dataset.v : "";
    if (!numeric) return raw.toLowerCase();
    return raw === "" ? null : Number(raw);
  }

  function sortBy(head) {
    const key = head.dataset.key;
    const numeric = head.dataset.type === "num";
    direction = sorted === key ? -direction : 1;
    sorted = key;
    const rows = cases();
    rows.sort((a, b) => {
      const x = value(a, key, numeric);
      const y = value(b, key, numeric);
      if (x === null || y === null) {
        return x === y ? order(a) - order(b) : x === null ? 1 : -1;
      }
      const c = x < y ? -1 : x > y ? 1 : 0;
      return c * direction || order(a) - order(b);
    });
    for (const body of rows) table.appendChild(body);
    for (const h of heads) h.removeAttribute("aria-sort");
    head.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
  }

  function filter() {
    const wanted = tag ? tag.value : "";
    const state = status ? status.value : "";
    const text = find ? find.value.trim().toLowerCase() : "";
    let count = 0;
    for (const body of cases()) {
      const tags = JSON.parse(body.dataset.tags);
      const ok =
        (!wanted || tags.includes(wanted)) &&
        (!state || body.dataset.status === state ||
          (state === "error" && body.dataset.error === "1")) &&
        (!text || body.dataset.name.toLowerCase().includes(text));
      body.hidden = !ok;
      if (ok) count += 1;
    }
    if (shown) shown.textContent = `${count} of ${total} cases`;
  }

  function open(body, yes) {
    const detail = body.querySelector("tr.detail");
    if (!detail) return;
    const wanted = yes === undefined ? detail.hidden : yes;
    detail.hidden = !wanted;
    body.querySelector("button.toggle").setAttribute("aria-expanded", String(wanted));
  }

  for (const head of heads) {
    head.querySelector("button").addEventListener("click", () => sortBy(head));
  }
  for (const control of [find, tag, status].filter(Boolean)) {
    control.addEventListener("input", filter);
    control.addEventListener("change", filter);
  }
  table.addEventListener("click", (event) => {
    const row = event.target.closest("tr.case-row");
    if (row && !event.target.closest("a")) open(row.parentElement);
  });
  for (const [id, yes] of [["expand", true], ["collapse", false]]) {
    const button = document.getElementById(id);
    if (button) button.addEventListener("click", () => {
      for (const body of cases()) open(body, yes);
    });
  }
  for (const bar of document.querySelectorAll("svg [data-case]")) {
    bar.addEventListener("click", () => {
      const body = document.getElementById(`case-${bar.dataset.case}`);
      if (!body) return;
      body.hidden = false;
      open(body, true);
      body.scrollIntoView({block: "nearest"});
    });
  }
  filter();
})();
""".strip()
