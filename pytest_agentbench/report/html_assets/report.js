// pytest-agentbench report: the whole task table (filter, sort, pages) and task panels.
// Every text from the data is set with textContent: nothing is parsed as markup.
(function () {
  "use strict";
  var PAGE = 100;
  var data = JSON.parse(document.getElementById("run-data").textContent);
  var cols = data.columns;
  var rows = data.rows;
  var col = {};
  cols.forEach(function (name, i) { col[name] = i; });
  var state = { suite: "", outcome: "", model: "", text: "", sort: null, dir: 1, page: 0 };
  var table = document.getElementById("task-table");
  var tbody = table.tBodies[0];
  var panel = document.getElementById("panel");
  var shownNow = [];
  document.body.classList.add("js");

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function fill(id, values) {
    var select = document.getElementById(id);
    values.forEach(function (v) { var o = el("option", v); o.value = v; select.appendChild(o); });
    select.addEventListener("change", function () { state[id.slice(2)] = select.value; state.page = 0; draw(); });
  }
  var present = {};
  rows.forEach(function (r) { present[r[col.outcome]] = true; });
  fill("f-suite", data.suites);
  fill("f-outcome", data.outcomes.filter(function (o) { return present[o]; }));
  fill("f-model", data.models);
  var search = document.getElementById("f-text");
  search.addEventListener("input", function () { state.text = search.value.toLowerCase(); state.page = 0; draw(); });

  function cell(value, name) {
    if (value === null || value === undefined) return "–";
    if (typeof value === "number") {
      if (name === "reward" || name === "first_try") return (Math.round(value * 1000) / 1000).toString();
      return value.toLocaleString("en");
    }
    return value;
  }

  function visible() {
    var out = [];
    var order = state.sort === null ? data.order : rows.map(function (_, i) { return i; });
    for (var k = 0; k < order.length; k++) {
      var i = order[k], r = rows[i];
      if (state.suite && r[col.suite] !== state.suite) continue;
      if (state.outcome && r[col.outcome] !== state.outcome) continue;
      if (state.model && r[col.model] !== state.model) continue;
      if (state.text) {
        var hay = (r[col.suite] + " " + r[col.task] + " " + r[col.model] + " " + r[col.reason]).toLowerCase();
        if (hay.indexOf(state.text) < 0) continue;
      }
      out.push(i);
    }
    if (state.sort !== null) {
      var c = col[state.sort], dir = state.dir;
      out.sort(function (a, b) {
        var x = rows[a][c], y = rows[b][c];
        if (x === y) return a - b;
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    return out;
  }

  function rowNode(i) {
    var tr = el("tr");
    tr.setAttribute("data-i", i);
    cols.forEach(function (name) {
      var td = el("td");
      if (name === "task") {
        var a = el("a", rows[i][col.task]);
        a.href = "#task-" + i;
        td.appendChild(a);
      } else {
        td.textContent = cell(rows[i][col[name]], name);
        if (name === "outcome") td.className = "o-text-" + rows[i][col.outcome];
      }
      tr.appendChild(td);
    });
    return tr;
  }

  function draw() {
    shownNow = visible();
    var pages = Math.max(1, Math.ceil(shownNow.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE;
    var frag = document.createDocumentFragment();
    shownNow.slice(start, start + PAGE).forEach(function (i) { frag.appendChild(rowNode(i)); });
    tbody.replaceChildren(frag);
    document.getElementById("shown").textContent = shownNow.length + " of " + rows.length + " tasks";
    document.getElementById("page").textContent = "page " + (state.page + 1) + " of " + pages;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.className = th.getAttribute("data-col") === state.sort ? (state.dir > 0 ? "asc" : "desc") : "";
    });
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    th.addEventListener("click", function () {
      var name = th.getAttribute("data-col");
      if (state.sort === name) state.dir = -state.dir; else { state.sort = name; state.dir = 1; }
      draw();
    });
  });
  document.getElementById("prev").addEventListener("click", function () { state.page -= 1; draw(); });
  document.getElementById("next").addEventListener("click", function () { state.page += 1; draw(); });
  tbody.addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr && event.target.tagName !== "A") location.hash = "task-" + tr.getAttribute("data-i");
  });

  function pre(text, cls) { return el("pre", text, cls); }

  function usageText(u) {
    if (!u) return "";
    if (u.native) return "tokens (as reported): " + JSON.stringify(u.native);
    var parts = [];
    if (u.input !== null && u.input !== undefined) parts.push(u.input + " in");
    if (u.output !== null && u.output !== undefined) parts.push(u.output + " out");
    if (u.reasoning) parts.push(u.reasoning + " reasoning");
    if (u.total !== null && u.total !== undefined) parts.push(u.total + " total");
    return parts.length ? "tokens: " + parts.join(" / ") : "";
  }

  function folded(summary, text, open) {
    var d = el("details");
    if (open) d.open = true;
    d.appendChild(el("summary", summary));
    d.appendChild(pre(text));
    return d;
  }

  function turnNode(t) {
    var box = el("div", null, "turn");
    var head = "turn " + (t.turn === null || t.turn === undefined ? "" : t.turn);
    var usage = usageText(t.usage);
    box.appendChild(el("div", head + (usage ? " · " + usage : ""), "muted small"));
    if (t.thinking) box.appendChild(folded("reasoning (" + t.thinking.length + " characters)", t.thinking));
    if (t.text) box.appendChild(pre(t.text));
    (t.tool_calls || []).forEach(function (call) {
      box.appendChild(el("div", "tool call: " + call.name, "role"));
      box.appendChild(pre(call.arguments));
      box.appendChild(el("div", call.is_error ? "tool result (error)" : "tool result", "role"));
      box.appendChild(pre(call.output, call.is_error ? "error" : ""));
    });
    if (t.killed) box.appendChild(pre(t.killed, "error"));
    if (t.error) box.appendChild(pre(t.error, "error"));
    return box;
  }

  function attemptNode(a, detail) {
    var box = el("div", null, "attempt");
    box.appendChild(el("h4", a.round === 0 ? "First try" : "Repair round " + a.round));
    var facts = [];
    if (a.verdict) facts.push("reward " + cell(a.verdict.reward, "reward"));
    if (a.finish_reason) facts.push("finish " + a.finish_reason);
    if (a.elapsed_s !== null) facts.push(Math.round(a.elapsed_s * 1000) / 1000 + " s");
    var usage = usageText(a.usage);
    if (usage) facts.push(usage);
    box.appendChild(el("div", facts.join(" · "), "muted small"));
    if (a.turns && a.turns.length) {
      a.turns.forEach(function (t) { box.appendChild(turnNode(t)); });
    } else {
      if (a.thinking) box.appendChild(folded("reasoning (" + a.thinking.length + " characters)", a.thinking));
      box.appendChild(pre(a.answer || "(no answer)"));
    }
    if (a.error) box.appendChild(pre(a.error, "error"));
    if (a.agent) box.appendChild(folded("agent under test: " + a.agent.summary, a.agent.output));
    if (a.loop) {
      var fig = document.getElementById("loop-" + detail.index);
      var text = "loop watch: " + a.loop.channel + " " + a.loop.state + ", peak score " + a.loop.score;
      box.appendChild(el("div", text, "muted small"));
      if (fig) box.appendChild(fig.querySelector("svg").cloneNode(true));
    }
    if (a.verdict) {
      var v = a.verdict;
      box.appendChild(el("div", "verdict: reward " + cell(v.reward, "reward"), "role"));
      var metrics = Object.keys(v.metrics || {}).map(function (k) { return k + " " + JSON.stringify(v.metrics[k]); });
      if (metrics.length) box.appendChild(el("div", metrics.join(", ")));
      if (v.feedback) box.appendChild(pre(v.feedback));
      if (v.error) box.appendChild(pre(v.error, "error"));
      if (v.details && v.details !== "{}") box.appendChild(folded("verifier details", v.details));
    }
    if (a.feedback_sent) {
      var fb = el("div", null, "feedback");
      fb.appendChild(el("div", "feedback given for round " + (a.round + 1), "role"));
      fb.appendChild(pre(a.feedback_sent));
      box.appendChild(fb);
    }
    return box;
  }

  function open(i) {
    var block = document.getElementById("d-" + i);
    if (!block) return;
    var detail = JSON.parse(block.textContent);
    detail.index = i;
    var r = rows[i];
    panel.replaceChildren();
    var close = el("button", "close ✕", "close");
    close.type = "button";
    close.addEventListener("click", function () { history.replaceState(null, "", "#tasks"); panel.hidden = true; });
    panel.appendChild(close);
    panel.appendChild(el("h2", r[col.suite] + " :: " + r[col.task] + " [" + r[col.model] + "]"));
    var line = el("p");
    line.appendChild(el("span", r[col.outcome], "badge o-" + r[col.outcome]));
    line.appendChild(document.createTextNode(" reward " + cell(r[col.reward], "reward") + (detail.reason ? " — " + detail.reason : "")));
    panel.appendChild(line);
    if (detail.failure) panel.appendChild(el("p", "failure: " + detail.failure.kind + " at " + detail.failure.stage + ": " + detail.failure.message, "error"));
    if (detail.rollout_dir) panel.appendChild(el("p", "rollout: " + detail.rollout_dir, "muted small"));
    if (detail.note) panel.appendChild(el("p", detail.note, "muted"));
    if (detail.prompt && detail.prompt.length) {
      panel.appendChild(el("h3", "Prompt"));
      detail.prompt.forEach(function (m) { panel.appendChild(el("div", m.role, "role")); panel.appendChild(pre(m.text)); });
    }
    if (detail.attempts && detail.attempts.length) {
      panel.appendChild(el("h3", "Transcript"));
      detail.attempts.forEach(function (a) { panel.appendChild(attemptNode(a, detail)); });
    }
    var names = Object.keys(detail.evidence || {});
    if (names.length) {
      panel.appendChild(el("h3", "Verifier evidence"));
      names.forEach(function (name) { panel.appendChild(folded(name, detail.evidence[name], true)); });
    }
    panel.hidden = false;
    Array.prototype.forEach.call(tbody.rows, function (tr) { tr.classList.toggle("open", tr.getAttribute("data-i") === String(i)); });
    panel.scrollIntoView({ block: "start" });
  }

  function route() {
    var m = /^#task-(\d+)$/.exec(location.hash);
    if (m) open(Number(m[1]));
  }
  window.addEventListener("hashchange", route);
  draw();
  route();
})();
