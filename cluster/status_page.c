/* A follower's console page: its management port has no console (the
 * broker's lives on the leader), so "/" gives a page that logs in and shows
 * the cluster as this node sees it -- name, leader, epoch, in-sync
 * replicas, whether confirms are held, and each node's role, ISR
 * membership, acknowledged sequence and lag (the leader's view, read from
 * etcd) -- refreshed every two seconds from GET /api/cluster with the
 * user's credentials. The page and its script are public, as the
 * console's assets are; the data is not. */
#include <event2/buffer.h>
#include <string.h>

#include "../http/http.h"
#include "cluster_int.h"

static const char page_html[] =
    "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>Warren: cluster (follower)</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>\n"
    "body{font:15px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}\n"
    "header{background:#1d2330;color:#fff;padding:.8rem 1.2rem}h1{margin:0;font-size:1.2rem}\n"
    "header p{margin:.2rem 0 0;color:#c9cfdb}main,form{margin:1.2rem;max-width:60rem}\n"
    "form label{display:block;margin:.5rem 0}input{font:inherit;padding:.3rem}\n"
    "button{font:inherit;padding:.35rem .9rem}#error{color:#b00020}\n"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}\n"
    "dt{color:#5a6272}dd{margin:0;font-weight:600}\n"
    "table{border-collapse:collapse;width:100%;margin-top:1rem;background:#fff}\n"
    "th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid #e2e5ea}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "@media (max-width:600px){thead{display:none}tr{display:block;margin-bottom:.8rem}\n"
    "td{display:flex;justify-content:space-between}td::before{content:attr(data-label);"
    "color:#5a6272}}\n</style>\n</head>\n<body>\n<header><h1>Warren</h1>\n"
    "<p>This node follows the cluster's leader: the full console is on the leader.</p>"
    "</header>\n<form id=\"login\">\n<label>Username <input id=\"user\" "
    "autocomplete=\"username\" required></label>\n<label>Password <input id=\"pass\" "
    "type=\"password\" autocomplete=\"current-password\"></label>\n<button>Log in</button>\n"
    "<p id=\"error\" role=\"alert\"></p>\n</form>\n<main id=\"cluster\" hidden>\n"
    "<dl class=\"facts\" id=\"facts\"></dl>\n<table id=\"cluster-nodes\"><thead><tr>"
    "<th>Node</th><th>Role</th><th>In sync</th><th>Alive</th><th>Acknowledged</th>"
    "<th>Lag</th><th>Lag time</th></tr></thead><tbody></tbody></table>\n"
    "<p><button id=\"logout\" type=\"button\">Log out</button></p>\n</main>\n"
    "<script src=\"/cluster.js\"></script>\n</body>\n</html>\n";

static const char page_js[] =
    "'use strict';\n"
    "const $ = (id) => document.getElementById(id);\n"
    "let auth = sessionStorage.getItem('warren-auth'), timer = null;\n"
    "const bytes = (n) => n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB`\n"
    "  : `${(n / 1048576).toFixed(1)} MiB`;\n"
    "const ms = (n) => n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(1)} s`;\n"
    "const known = (v, f) => v === null || v === undefined ? '\\u2013' : f(v);\n"
    "function cell(tr, label, text, num) {\n"
    "  const td = tr.insertCell(); td.textContent = text; td.dataset.label = label;\n"
    "  if (num) td.className = 'num';\n}\n"
    "function render(st) {\n"
    "  const facts = [['Cluster', st.cluster_name], ['This node', `${st.node} (${st.role})`],\n"
    "    ['Leader', st.leader || 'none'], ['Epoch', st.epoch],\n"
    "    ['In-sync replicas', `${st.isr_size} (min ${st.min_isr})`],\n"
    "    ['Confirms', st.confirms_held === null ? 'unknown' : st.confirms_held ? 'held' : "
    "'flowing']];\n"
    "  $('facts').replaceChildren(...facts.flatMap(([k, v]) => {\n"
    "    const dt = document.createElement('dt'), dd = document.createElement('dd');\n"
    "    dt.textContent = k; dd.textContent = String(v); return [dt, dd];\n  }));\n"
    "  const body = $('cluster-nodes').tBodies[0];\n  body.replaceChildren();\n"
    "  for (const n of st.nodes) {\n    const tr = body.insertRow();\n"
    "    cell(tr, 'Node', n.name); cell(tr, 'Role', n.role);\n"
    "    cell(tr, 'In sync', n.in_sync ? 'in sync' : 'out'); cell(tr, 'Alive', n.alive ? "
    "'yes' : 'no');\n"
    "    cell(tr, 'Acknowledged', known(n.acked_sequence, String), true);\n"
    "    cell(tr, 'Lag', known(n.lag_bytes, bytes), true); cell(tr, 'Lag time', "
    "known(n.lag_ms, ms), true);\n  }\n}\n"
    "async function refresh() {\n"
    "  const r = await fetch('/api/cluster', { headers: { Authorization: auth } });\n"
    "  if (r.status === 401) { logout('Login failed'); return; }\n"
    "  if (r.ok) { $('login').hidden = true; $('cluster').hidden = false; render(await r.json()); }\n"
    "}\n"
    "function logout(why) {\n  clearInterval(timer); auth = null; "
    "sessionStorage.removeItem('warren-auth');\n"
    "  $('cluster').hidden = true; $('login').hidden = false; $('error').textContent = why || "
    "'';\n}\n"
    "function start() { refresh(); timer = setInterval(refresh, 2000); }\n"
    "$('login').addEventListener('submit', (e) => {\n  e.preventDefault();\n"
    "  auth = 'Basic ' + btoa(`${$('user').value}:${$('pass').value}`);\n"
    "  sessionStorage.setItem('warren-auth', auth); start();\n});\n"
    "$('logout').addEventListener('click', () => logout());\n"
    "if (auth) start();\n";

bool status_page_path(const char *path)
{
    return strcmp(path, "/") == 0 || strcmp(path, "/cluster.js") == 0;
}

void status_page_serve(http_req *req, const char *path)
{
    bool js = strcmp(path, "/cluster.js") == 0;
    struct evbuffer *out = evbuffer_new();
    if (out)
        evbuffer_add_reference(out, js ? page_js : page_html,
                               js ? sizeof page_js - 1 : sizeof page_html - 1, NULL, NULL);
    http_reply_header(req, "Content-Type", js ? "text/javascript; charset=utf-8"
                                              : "text/html; charset=utf-8");
    http_reply_header(req, "Content-Security-Policy",
                      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'");
    http_reply_header(req, "X-Content-Type-Options", "nosniff");
    http_reply(req, out ? 200 : 500, out ? "OK" : "Internal Server Error", out);
    if (out)
        evbuffer_free(out);
}
