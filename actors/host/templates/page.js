// The tree page, live: polls /events for what came since the last one it has, and,
// when something came, the tree's table. Every event line goes in as text
// (textContent), never as markup; the table is the server's escaped HTML.
(function () {
  "use strict";
  var list = document.getElementById("events");
  if (!list) { return; }
  var tree = document.getElementById("tree");
  var live = document.getElementById("live");
  var after = parseInt(list.dataset.after, 10) || 0;
  var every = parseInt(list.dataset.pollMs, 10) || 1000;
  var KEEP = 200;  // lines kept on the page

  function add(e) {
    var li = document.createElement("li");
    li.textContent = e.line;
    if (e.abnormal) { li.className = "abnormal"; }
    list.appendChild(li);
    while (list.children.length > KEEP) { list.removeChild(list.firstChild); }
  }

  function refreshTree() {
    fetch(tree.dataset.src, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { tree.innerHTML = html; } })
      .catch(function () {});
  }

  function poll() {
    fetch("/events?after=" + after, { cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (answer) {
        answer.events.forEach(add);
        var came = answer.next !== after;
        after = answer.next;
        list.dataset.after = String(after);
        live.textContent = "live: new events every " + every / 1000 + " s";
        if (came) { refreshTree(); }
        // A burst: ask again at once for the rest.
        setTimeout(poll, answer.events.length >= 100 ? 0 : every);
      })
      .catch(function () {
        live.textContent = "the tree does not answer (it may have ended); retrying";
        setTimeout(poll, every * 5);
      });
  }
  setTimeout(poll, every);
  setInterval(refreshTree, every * 5);  // uptimes and health move without events
}());
