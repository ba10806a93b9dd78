(function () {
  "use strict";
  // Every string in the data came from crawled pages: it reaches the page only through
  // textContent or a checked http(s) href, never through innerHTML or an event attribute.
  var PAGE_SIZE = 50;
  var MEMBERS_SHOWN = 100;
  var MAX_EDIT = 2000;
  var MAX_HOSTS = 2000;
  var URL = 0, TITLE = 1, SIM = 2, METHOD = 3, SEEN = 4, DUP = 5, HOST = 6, TEXT = 7, UNCERTAIN = 8;

  var data = JSON.parse(document.getElementById("nd-data").textContent);
  var clusters = data.clusters;
  var texts = null;
  var searchIndex = null;
  var state = { view: null, page: 0, open: {} };

  function texts_() {
    if (texts === null) texts = JSON.parse(document.getElementById("nd-texts").textContent);
    return texts;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function safeHref(url) {
    try {
      var parsed = new window.URL(url);
      if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
    } catch (e) { /* not a URL: shown as text */ }
    return null;
  }

  function urlNode(url) {
    var href = safeHref(url);
    var node = el(href ? "a" : "span", "url", url);
    if (href) {
      node.href = href;
      node.target = "_blank";
      node.rel = "noopener noreferrer";
    }
    return node;
  }

  function fmtSim(sim) { return sim === null ? "" : sim.toFixed(3); }

  function fmtTime(seen) {
    var d = new Date(seen * 1000);
    return isNaN(d.getTime()) ? "" : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function methodName(index) { return index >= 0 ? data.methods[index] : ""; }

  // --- filtering and paging ------------------------------------------------------------------

  function buildSearchIndex() {
    searchIndex = new Array(clusters.length);
    for (var i = 0; i < clusters.length; i++) {
      var members = clusters[i][1], parts = new Array(members.length);
      for (var j = 0; j < members.length; j++) parts[j] = members[j][URL];
      searchIndex[i] = parts.join("\n").toLowerCase();
    }
  }

  function applyFilter() {
    var query = document.getElementById("nd-search").value.trim().toLowerCase();
    var host = parseInt(document.getElementById("nd-host").value, 10);
    if (query && searchIndex === null) buildSearchIndex();
    var view = [];
    for (var i = 0; i < clusters.length; i++) {
      if (query && searchIndex[i].indexOf(query) < 0) continue;
      if (host >= 0) {
        var members = clusters[i][1], found = false;
        for (var j = 0; j < members.length && !found; j++) found = members[j][HOST] === host;
        if (!found) continue;
      }
      view.push(i);
    }
    state.view = view;
    state.page = 0;
    render();
  }

  function render() {
    var view = state.view, body = document.querySelector("#nd-clusters tbody");
    var pages = Math.max(1, Math.ceil(view.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE_SIZE, end = Math.min(view.length, start + PAGE_SIZE);
    var rows = document.createDocumentFragment();
    for (var i = start; i < end; i++) {
      rows.appendChild(clusterRow(view[i]));
      if (state.open[view[i]]) rows.appendChild(detailsRow(view[i]));
    }
    body.replaceChildren(rows);
    document.getElementById("nd-range").textContent = view.length
      ? "clusters " + (start + 1).toLocaleString() + "\u2013" + end.toLocaleString() + " of " +
        view.length.toLocaleString() + " (page " + (state.page + 1) + " of " + pages + ")"
      : "0 clusters";
    document.getElementById("nd-prev").disabled = state.page === 0;
    document.getElementById("nd-next").disabled = state.page >= pages - 1;
    document.getElementById("nd-empty").hidden = view.length > 0;
  }

  function clusterRow(index) {
    var cluster = clusters[index], members = cluster[1], canonical = members[0];
    var row = el("tr", "cluster-row" + (state.open[index] ? " open" : ""));
    row.dataset.cluster = String(index);
    row.appendChild(el("td", "num", cluster[0]));
    row.appendChild(el("td", "num", members.length));
    var page = el("td");
    page.appendChild(el("div", "url", canonical[URL]));
    if (cluster[2]) page.appendChild(el("div", "title", "clean URL: " + cluster[2]));
    if (canonical[TITLE]) page.appendChild(el("div", "title", canonical[TITLE]));
    row.appendChild(page);
    var methods = {}, hosts = {}, low = null, high = null;
    members.forEach(function (m) {
      if (m[METHOD] >= 0) methods[methodName(m[METHOD])] = true;
      hosts[data.hosts[m[HOST]][0] || "(no host)"] = true;
      if (m[SIM] !== null) {
        low = low === null ? m[SIM] : Math.min(low, m[SIM]);
        high = high === null ? m[SIM] : Math.max(high, m[SIM]);
      }
    });
    var tags = el("td");
    Object.keys(methods).forEach(function (name) { tags.appendChild(el("span", "tag", name)); });
    row.appendChild(tags);
    row.appendChild(el("td", "num", low === null ? "" : low === high ? fmtSim(low) : fmtSim(low) + "\u2013" + fmtSim(high)));
    var hostNames = Object.keys(hosts);
    row.appendChild(el("td", "url", hostNames.slice(0, 3).join(", ") + (hostNames.length > 3 ? " +" + (hostNames.length - 3) : "")));
    row.addEventListener("click", function () {
      if (state.open[index]) delete state.open[index]; else state.open[index] = { member: 1, shown: MEMBERS_SHOWN };
      render();
    });
    return row;
  }

  // --- one cluster ----------------------------------------------------------------------------

  function detailsRow(index) {
    var cluster = clusters[index], members = cluster[1], open = state.open[index];
    var row = el("tr", "details"), cell = el("td");
    cell.colSpan = 6;
    row.appendChild(cell);
    var table = el("table", "members"), head = el("tr");
    ["", "Page", "Similarity", "Method", "Duplicate of", "Seen", ""].forEach(function (name) {
      head.appendChild(el("th", name === "Similarity" ? "num" : "", name));
    });
    var thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    var tbody = el("tbody");
    members.slice(0, open.shown).forEach(function (m, j) {
      var tr = el("tr");
      var role = el("td");
      var tag = j === 0 ? "canonical" : m[UNCERTAIN] ? "uncertain" : "member";
      role.appendChild(el("span", j === 0 ? "tag canonical" : m[UNCERTAIN] ? "tag uncertain" : "tag", tag));
      if (m[UNCERTAIN]) role.title = "let through and stored: it resembles the page it names, not surely enough to drop";
      tr.appendChild(role);
      var page = el("td");
      page.appendChild(urlNode(m[URL]));
      if (m[TITLE]) page.appendChild(el("div", "title", m[TITLE]));
      tr.appendChild(page);
      tr.appendChild(el("td", "num", fmtSim(m[SIM])));
      tr.appendChild(el("td", "", methodName(m[METHOD])));
      var dup = el("td", "url", m[DUP] >= 0 ? members[m[DUP]][URL] : "");
      tr.appendChild(dup);
      tr.appendChild(el("td", "", fmtTime(m[SEEN])));
      var action = el("td");
      if (j > 0) {
        var button = el("button", "link compare", j === open.member ? "shown below" : "compare");
        button.type = "button";
        button.disabled = j === open.member;
        button.addEventListener("click", function (event) {
          event.stopPropagation();
          open.member = j;
          render();
        });
        action.appendChild(button);
      }
      tr.appendChild(action);
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
    cell.appendChild(table);
    if (members.length > open.shown) {
      var more = el("button", "", "show " + Math.min(MEMBERS_SHOWN, members.length - open.shown) + " more of " +
        (members.length - open.shown).toLocaleString());
      more.type = "button";
      more.addEventListener("click", function (event) {
        event.stopPropagation();
        open.shown += MEMBERS_SHOWN;
        render();
      });
      cell.appendChild(more);
    }
    cell.appendChild(diffView(members[0], members[Math.min(open.member, members.length - 1)]));
    return row;
  }

  function textOf(member) {
    var key = member[TEXT];
    if (key >= 0) return { text: texts_()[key] };
    return { note: key === -1 ? "The index kept no text for this page (NEARDUP_KEEP_TEXT)."
                              : "Text left out to keep the report small (--text-budget)." };
  }

  function diffView(canonical, member) {
    var box = el("div", "diff");
    var left = textOf(canonical), right = textOf(member);
    var leftPane = pane("canonical: " + canonical[URL]), rightPane = pane("member: " + member[URL]);
    box.appendChild(leftPane.root);
    box.appendChild(rightPane.root);
    if (left.note || right.note) {
      leftPane.text.appendChild(left.note ? el("span", "note", left.note) : document.createTextNode(left.text));
      rightPane.text.appendChild(right.note ? el("span", "note", right.note) : document.createTextNode(right.text));
      return box;
    }
    var ops = diffWords(tokens(left.text), tokens(right.text));
    fill(leftPane.text, ops, -1, "del");
    fill(rightPane.text, ops, 1, "ins");
    var removed = 0, added = 0;
    ops.forEach(function (op) {
      if (op[0] === -1 && op[1].charAt(0) !== "\n") removed++;
      if (op[0] === 1 && op[1].charAt(0) !== "\n") added++;
    });
    var wrap = el("div");
    var legend = el("p", "legend note");
    legend.appendChild(el("span", "del", words(removed) + " only in the canonical page"));
    legend.appendChild(el("span", "ins", words(added) + " only in this member"));
    legend.appendChild(el("span", "", "(the first characters of each main text, as kept in the index)"));
    wrap.appendChild(legend);
    wrap.appendChild(box);
    return wrap;
  }

  function words(n) { return n.toLocaleString() + (n === 1 ? " word" : " words"); }

  function pane(title) {
    var root = el("div", "pane"), text = el("div", "text");
    root.appendChild(el("h4", "", title));
    root.appendChild(text);
    return { root: root, text: text };
  }

  // Words and line breaks; the panes join words with one space, so spacing changes are no difference.
  function tokens(text) { return text.match(/\n+|[^\s]+/g) || []; }

  // Runs of equal kind become one text node (or one highlighted span): few DOM nodes even for long texts.
  function fill(target, ops, side, className) {
    var run = [], kind = 0;
    function flush() {
      if (!run.length) return;
      var text = run.join(" ").replace(/ ?(\n+) ?/g, "$1") + " ";
      target.appendChild(kind === 0 ? document.createTextNode(text) : el("span", className, text));
      run = [];
    }
    for (var i = 0; i < ops.length; i++) {
      var op = ops[i];
      if (op[0] !== 0 && op[0] !== side) continue;
      if (op[0] !== kind) { flush(); kind = op[0]; }
      run.push(op[1]);
    }
    flush();
  }

  // Myers' O(ND) difference of two token lists, after trimming the common head and tail.
  // Returns [kind, token] with kind 0 (both), -1 (only in a), 1 (only in b). Past MAX_EDIT
  // edits the middle is shown as replaced whole, which bounds the time on unrelated texts.
  function diffWords(a, b) {
    var head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head++;
    var ea = a.length, eb = b.length;
    while (ea > head && eb > head && a[ea - 1] === b[eb - 1]) { ea--; eb--; }
    var out = [], i;
    for (i = 0; i < head; i++) out.push([0, a[i]]);
    var middle = myers(a.slice(head, ea), b.slice(head, eb));
    for (i = 0; i < middle.length; i++) out.push(middle[i]);
    for (i = ea; i < a.length; i++) out.push([0, a[i]]);
    return out;
  }

  function myers(a, b) {
    var n = a.length, m = b.length, i;
    var replaced = function () {
      var out = [];
      for (i = 0; i < n; i++) out.push([-1, a[i]]);
      for (i = 0; i < m; i++) out.push([1, b[i]]);
      return out;
    };
    if (n === 0 || m === 0) return replaced();
    var max = Math.min(n + m, MAX_EDIT), offset = max + 1;
    var v = new Int32Array(2 * max + 3), trace = [], found = -1;
    v[offset + 1] = 0;
    for (var d = 0; d <= max && found < 0; d++) {
      trace.push(v.slice(offset - d - 1, offset + d + 2));
      for (var k = -d; k <= d; k += 2) {
        var x = (k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1])) ? v[offset + k + 1] : v[offset + k - 1] + 1;
        var y = x - k;
        while (x < n && y < m && a[x] === b[y]) { x++; y++; }
        v[offset + k] = x;
        if (x >= n && y >= m) { found = d; break; }
      }
    }
    if (found < 0) return replaced();
    var ops = [], cx = n, cy = m;
    for (d = found; d > 0; d--) {
      var snap = trace[d], base = d + 1, ck = cx - cy;
      var down = ck === -d || (ck !== d && snap[base + ck - 1] < snap[base + ck + 1]);
      var pk = down ? ck + 1 : ck - 1, px = snap[base + pk], py = px - pk;
      while (cx > px && cy > py) { ops.push([0, a[cx - 1]]); cx--; cy--; }
      if (down) ops.push([1, b[py]]); else ops.push([-1, a[px]]);
      cx = px; cy = py;
    }
    while (cx > 0 && cy > 0) { ops.push([0, a[cx - 1]]); cx--; cy--; }
    return ops.reverse();
  }

  // --- start ----------------------------------------------------------------------------------

  // Hosts come most pages first; past MAX_HOSTS a select is no help, the URL search still is.
  var select = document.getElementById("nd-host");
  data.hosts.slice(0, MAX_HOSTS).forEach(function (host, i) {
    var option = el("option", "", (host[0] || "(no host)") + " (" + host[1].toLocaleString() + ")");
    option.value = String(i);
    select.appendChild(option);
  });
  if (data.hosts.length > MAX_HOSTS) {
    var more = el("option", "", "\u2026 " + (data.hosts.length - MAX_HOSTS).toLocaleString() +
      " more hosts: search their URLs");
    more.disabled = true;
    select.appendChild(more);
  }
  var timer = null;
  document.getElementById("nd-search").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(applyFilter, clusters.length > 20000 ? 250 : 60);
  });
  select.addEventListener("change", applyFilter);
  document.getElementById("nd-prev").addEventListener("click", function () { state.page--; render(); });
  document.getElementById("nd-next").addEventListener("click", function () { state.page++; render(); });
  state.view = clusters.map(function (_, i) { return i; });
  render();
  document.body.dataset.ready = "1";
})();
