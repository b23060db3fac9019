// The web view's pages, chosen by the path: stacks, one stack (graph, resources, live events),
// a deployment, servers, events, failures. Read-only: nothing here changes the control plane.
"use strict";
(function () {
  const { el, getJSON, when, ago, badge, counts, table, facts, show, failed, text, enc } = window.Anneal;
  const params = new URLSearchParams(window.location.search);

  const stackLink = (name) => el("a", { href: `/ui/stacks/${enc(name)}` }, name);
  const depLink = (id, label) => el("a", { href: `/ui/deployments/${enc(id)}` }, label || id);

  async function stacksPage() {
    const stacks = await getJSON("/ui/api/stacks");
    show(el("h1", {}, "Stacks"),
      stacks.length === 0 ? el("p", { class: "muted" }, "No stacks yet: anneal stack create NAME -t TEMPLATE.") :
        table(["name", "status", "resources", "reason", "updated"], stacks.map((s) => [
          stackLink(s.name), badge(s.status), counts(s.counts), s.status_reason, when(s.updated_at)])));
  }

  function eventRows(events) {
    return events.map((e) => [when(e.timestamp), e.stack_name, e.resource_name,
      badge(`${e.action}_${e.status}`), e.reason,
      e.deployment_id ? depLink(e.deployment_id, `gen ${e.generation}`) : ""]);
  }
  const EVENT_HEADINGS = ["time", "stack", "resource", "status", "reason", "deployment"];

  async function stackPage(name) {
    const base = `/ui/api/stacks/${enc(name)}`;
    let data = await getJSON(`${base}/graph`);
    const head = el("div", { id: "stack-head" });
    const graphBox = el("div", { id: "graph" });
    const listBox = el("div", { id: "resources" });
    const eventsBody = el("tbody", { id: "events" });
    const live = el("span", { class: "live", id: "live" }, "connecting…");
    show(head, el("h2", {}, "Dependency graph ", live), legend(data), graphBox,
      el("h2", {}, "Resources"), listBox,
      el("h2", {}, "Events ", el("a", { href: `/ui/events?stack=${enc(name)}` }, "(all, with filters)")),
      el("table", {}, el("thead", {}, el("tr", {}, EVENT_HEADINGS.map((h) => el("th", {}, h)))), eventsBody));
    drawHead(head, data);
    head.after(controls(base));
    const pager = resourceList(listBox, base);
    const graph = window.Anneal.graph.draw(graphBox, data,
      (node) => window.location.assign(`/ui/deployments/${enc(node.deployment)}`),
      (type) => pager.ofType(type).catch(window.Anneal.failed));
    await pager.load(1);
    // The newest events (newest first): a big stack's first 200 would be its oldest.
    const recent = (await getJSON(`${base}/events?limit=200&newest=true`)).reverse();
    prependEvents(eventsBody, recent);
    let timer = null;
    const refresh = () => {
      clearTimeout(timer);
      timer = setTimeout(async () => {
        data = await getJSON(`${base}/graph`);
        drawHead(head, data);
        graph.update(data);
        await pager.reload();
      }, 250);
    };
    const after = recent.length ? recent[recent.length - 1].id : 0;
    const source = new EventSource(`${base}/stream?after=${after}`);
    source.onopen = () => { live.textContent = "live"; live.className = "live on"; };
    source.onerror = () => { live.textContent = "reconnecting…"; live.className = "live"; };
    source.addEventListener("events", (message) => {
      prependEvents(eventsBody, JSON.parse(message.data));
      refresh();
    });
  }

  function prependEvents(body, events) {
    const rows = eventRows(events).reverse().map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))));
    body.prepend(...rows);
    while (body.children.length > 200) body.lastChild.remove();
  }

  function legend(data) {
    const note = data.aggregated ? el("p", { class: "notice" },
      `${data.total} resources: drawn as one node per resource type (a click lists that type below); ` +
      "the list below has every one.") : null;
    return el("div", {}, el("p", { class: "legend muted" },
      ["COMPLETE", "IN_PROGRESS", "FAILED", "INIT"].map((s) => el("span", {}, badge(s, s)))),
      "Dashed: replaced or removed, awaiting cleanup. Boxes: nested stacks and groups: " +
      "a click opens one in place (another closes it); the resource list below links its page.", note);
  }

  function drawHead(head, data) {
    head.replaceChildren(
      el("h1", {}, data.name, " ", el("span", { id: "stack-status" }, badge(data.status))),
      facts([
        ["reason", data.status_reason || "—"],
        ["resources", el("span", {}, `${data.total} `, counts(data.counts))],
        ["version / traversal", `${data.version} / ${data.traversal}`],
        ["updated", when(data.updated_at)],
        data.parent ? ["nested in", stackLink(data.parent)] : null,
        ["failures", el("a", { href: `/ui/failures?stack=${enc(data.name)}` }, "failures of this stack")],
      ].filter(Boolean)));
  }

  function resourceList(box, base) {
    let page = 1;
    let state = "";
    let kind = "";  // one resource type only: a type's node of a big stack's graph was clicked
    let cursor = "";  // "&after=ID" or "&before=ID": the page next to the one read (constant at any depth)
    let latest = 0;  // the newest load: an older one's answer arriving after it is dropped
    const load = async (n, at = "") => {
      page = n;
      cursor = at;
      const asked = ++latest;
      const query = `page=${page}&per_page=50${state ? `&state=${state}` : ""}${kind ? `&type=${enc(kind)}` : ""}${cursor}`;
      const data = await getJSON(`${base}/resources?${query}`);
      if (asked !== latest) return;  // a click (a type, a page, a state) asked for another list meanwhile
      const last = Math.max(1, Math.ceil(data.total / data.per_page));
      const first = data.items.length ? data.items[0].id : 0;
      const final = data.items.length ? data.items[data.items.length - 1].id : 0;
      const filter = el("select", { "aria-label": "state", onchange: (e) => { state = e.target.value; load(1); } },
        ["", ...window.Anneal.STATES].map((s) => el("option", { value: s, selected: s === state }, s || "every state")));
      const typed = kind ? el("button", { type: "button", id: "every-type", onclick: () => { kind = ""; load(1); } },
        `${kind} only: show every type`) : null;
      box.replaceChildren(
        el("div", { class: "pager" }, filter, typed,
          el("button", { type: "button", disabled: page <= 1,
            onclick: () => load(page - 1, page > 2 ? `&before=${first}` : "") }, "Previous"),
          `page ${page} of ${last} (${data.total} resources)`,
          el("button", { type: "button", disabled: page >= last, onclick: () => load(page + 1, `&after=${final}`) }, "Next")),
        table(["name", "type", "status", "reason", "detail"], data.items.map((r) => [
          r.name, r.type, badge(r.status), r.reason,
          r.nested ? stackLink(r.nested) : (r.type.endsWith("Deployment") && r.physical_id ? depLink(r.physical_id) : (r.current ? "" : "old"))])));
    };
    return { load, reload: () => load(page, cursor), ofType: (type) => { kind = type; return load(1); } };
  }

  async function deploymentPage(id) {
    const d = await getJSON(`/ui/api/deployments/${enc(id)}`);
    const kv = (values) => table(["name", "value"], Object.entries(values || {}).map(([k, v]) => [k, el("code", {}, text(v))]));
    const generations = {};
    for (const h of d.history) (generations[h.generation ?? "-"] ||= []).push(h);
    show(
      el("h1", {}, d.name || d.resource_name, " ", badge(`${d.action}_${d.status}`)),
      facts([
        ["id", d.id], ["resource", d.resource_name], ["server", el("a", { href: `/ui/servers?server=${enc(d.server_name || d.server_id)}` }, d.server_name || d.server_id)],
        ["group", d.group || "—"], ["generation", d.generation], ["status code", d.deploy_status_code ?? "—"],
        ["reason", d.status_reason || "—"], ["started", when(d.started_at)], ["completed", when(d.completed_at)],
        ["signal transport", d.signal_transport],
      ]),
      d.status === "IN_PROGRESS" ? el("p", { class: "live on" }, "running: this page refreshes every 2 s") : null,
      d.status === "IN_PROGRESS" && d.progress ? [el("h2", {}, "Live output (tail)"),
        el("pre", { id: "live-output" }, d.progress.output_tail || "")] : null,
      el("h2", {}, "Inputs"), kv(d.input_values),
      el("h2", {}, "Outputs"), kv(d.output_values),
      el("h2", {}, "stdout"), el("pre", { id: "stdout" }, d.deploy_stdout || ""),
      el("h2", {}, "stderr"), el("pre", { id: "stderr" }, d.deploy_stderr || ""),
      el("h2", {}, "Status history"),
      Object.entries(generations).map(([gen, rows]) => [el("h3", {}, `generation ${gen}`),
        table(["time", "status", "reason"], rows.map((h) => [when(h.timestamp), badge(`${h.action}_${h.status}`), h.reason]))]),
      d.attempts ? [el("h2", {}, "Attempts"), el("pre", {}, text(d.attempts))] : null);
    if (d.status === "IN_PROGRESS") setTimeout(() => route().catch(failed), 2000);
  }

  async function serversPage() {
    const chosen = params.get("server");
    const servers = await getJSON("/ui/api/servers");
    const addresses = (s) => ((s.agent_status || {}).addresses || []).map((a) => (typeof a === "string" ? a : a.addr || text(a))).join(", ");
    const parts = [el("h1", {}, "Servers"),
      table(["name", "agent", "last seen", "agent version", "OS", "transport", "addresses", "deployments"], servers.map((s) => [
        el("a", { href: `/ui/servers?server=${enc(s.name)}` }, s.name),
        el("span", { class: `badge ${s.agent.replace(/ /g, "-")}` }, s.agent), el("span", { title: when(s.last_seen) }, ago(s.last_seen)),
        (s.agent_status || {}).version || "—", (s.agent_status || {}).os || "—", s.transport, addresses(s) || "—",
        counts(s.deployments)]))];
    if (chosen) {
      const s = await getJSON(`/ui/api/servers/${enc(chosen)}`);
      parts.push(el("h2", {}, `What ${s.name} runs`),
        table(["deployment", "resource", "status", "generation", "updated"], s.deployments.map((d) => [
          depLink(d.id, d.name || d.id), d.resource_name, badge(`${d.action}_${d.status}`), d.generation, when(d.updated_at)])));
    }
    show(parts);
  }

  async function eventsPage() {
    const stacks = await getJSON("/ui/api/stacks");
    const stack = params.get("stack") || (stacks[0] && stacks[0].name) || "";
    const field = (name, control) => el("label", {}, name, control);
    const form = el("form", { class: "filters", method: "get", action: "/ui/events" },
      field("stack", el("select", { name: "stack" }, stacks.map((s) => el("option", { value: s.name, selected: s.name === stack }, s.name)))),
      field("resource", el("input", { name: "resource", value: params.get("resource") || "" })),
      field("status", el("select", { name: "status" }, ["", "IN_PROGRESS", "COMPLETE", "FAILED"].map((s) =>
        el("option", { value: s, selected: s === (params.get("status") || "") }, s || "any")))),
      field("after event", el("input", { name: "after", value: params.get("after") || "", size: 6 })),
      el("button", { type: "submit" }, "Filter"));
    if (!stack) return show(el("h1", {}, "Events"), el("p", { class: "muted" }, "No stacks yet."));
    const query = new URLSearchParams({ limit: "200" });
    for (const key of ["resource", "status", "after"]) if (params.get(key)) query.set(key, params.get(key));
    const events = await getJSON(`/ui/api/stacks/${enc(stack)}/events?${query}`);
    const next = events.length === 200 ? el("a", { href: `/ui/events?${new URLSearchParams({ ...Object.fromEntries(params), stack, after: events[199].id })}` }, "next 200") : null;
    show(el("h1", {}, "Events"), form, table(EVENT_HEADINGS, eventRows(events)), next,
      events.length ? null : el("p", { class: "muted" }, "No events match."));
  }

  async function failuresPage() {
    const one = params.get("stack");
    const stacks = one ? [{ stack: one, failures: await getJSON(`/ui/api/stacks/${enc(one)}/failures`) }] : await getJSON("/ui/api/failures");
    const parts = [el("h1", {}, one ? `Failures of ${one}` : "Failures")];
    if (!stacks.some((s) => s.failures.length)) parts.push(el("p", { class: "muted" }, "Nothing has failed."));
    for (const s of stacks) {
      parts.push(el("h2", {}, stackLink(s.stack), " ", s.status ? badge(s.status) : null), s.reason ? el("p", {}, s.reason) : null);
      for (const f of s.failures) {
        parts.push(el("h3", {}, f.resource, " ", badge(f.status)), el("p", {}, f.reason),
          f.deployment_id ? el("p", {}, depLink(f.deployment_id, "the deployment"), " on server ",
            el("a", { href: `/ui/servers?server=${enc(f.server_id)}` }, f.server_id), `, exit ${f.deploy_status_code ?? "—"}`) : null,
          f.deploy_stdout ? [el("div", { class: "muted" }, "stdout (tail)"), el("pre", {}, f.deploy_stdout)] : null,
          f.deploy_stderr ? [el("div", { class: "muted" }, "stderr (tail)"), el("pre", {}, f.deploy_stderr)] : null);
      }
    }
    show(parts);
  }

  /** Read the page again in *ms* (the stacks and servers pages: their rows change as agents beat). */
  function again(ms) {
    setTimeout(() => route().catch(failed), ms);
  }

  function route() {
    const path = window.location.pathname;
    const match = (prefix) => (path.startsWith(prefix) ? decodeURIComponent(path.slice(prefix.length)) : null);
    if (path === "/ui/") return stacksPage().then(() => again(5000));
    if (match("/ui/stacks/")) return stackPage(match("/ui/stacks/"));
    if (match("/ui/deployments/")) return deploymentPage(match("/ui/deployments/"));
    if (path === "/ui/servers") return serversPage().then(() => again(10000));
    if (path === "/ui/events") return eventsPage();
    if (path === "/ui/failures") return failuresPage();
    return Promise.reject(new Error(`no page at ${path}`));
  }

  /** Converge and Cancel for a session that may change things (ui/actions.py); nothing for a reader. */
  function controls(base) {
    const session = window.Anneal.session;
    if (!session.can_change) return el("span", {});
    const said = el("span", { id: "action-result", class: "muted", role: "status" });
    const press = (what) => async () => {
      said.textContent = `${what}…`;
      const response = await fetch(`${base}/${what}`, {
        method: "POST", credentials: "same-origin", headers: { "X-Anneal-Form": session.form_token },
      });
      const body = await response.json().catch(() => null);
      said.textContent = response.ok ? `${what}: ${response.status}` : `${what} refused: ${body && body.error ? body.error.message : response.status}`;
    };
    return el("p", { class: "controls" },
      el("button", { id: "converge", type: "button", onclick: press("converge") }, "Converge"), " ",
      el("button", { id: "cancel", type: "button", onclick: press("cancel") }, "Cancel"), " ", said);
  }

  async function start() {
    const session = await getJSON("/ui/api/session");
    window.Anneal.session = session;
    const where = session.project || "all projects";
    document.getElementById("session").textContent = `${session.role} · ${where}${session.can_change ? "" : " · read-only"}`;
    document.getElementById("session").title = session.why;
    await route();
  }

  document.addEventListener("DOMContentLoaded", () => start().catch(failed));
})();
