// The web view's helpers: building elements (text only, never HTML from data), fetching JSON, formatting.
"use strict";
window.Anneal = (function () {
  const STATES = ["FAILED", "IN_PROGRESS", "INIT", "COMPLETE"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  class ApiError extends Error {}

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 401) {
      window.location.assign("/ui/login");
      throw new ApiError("the session ended: log in again");
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      const error = body && body.error;
      throw new ApiError(error ? `${error.message}${error.where ? ` (${error.where})` : ""}` : response.statusText);
    }
    return body;
  }

  function when(seconds) {
    if (!seconds) return "—";
    return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z";
  }

  function ago(seconds) {
    if (!seconds) return "never";
    const delta = Math.max(0, Date.now() / 1000 - seconds);
    if (delta < 90) return `${Math.round(delta)} s ago`;
    if (delta < 5400) return `${Math.round(delta / 60)} min ago`;
    return `${Math.round(delta / 3600)} h ago`;
  }

  /** The colour class of a status such as CREATE_COMPLETE or a state such as INIT. */
  function stateOf(status) {
    if (!status) return "INIT";
    if (status.endsWith("IN_PROGRESS")) return "IN_PROGRESS";
    if (status.startsWith("INIT")) return "INIT";
    return STATES.find((s) => status.endsWith(s)) || "INIT";
  }

  function badge(status, text) {
    return el("span", { class: `badge ${stateOf(status)}` }, text || status);
  }

  function counts(values) {
    return el("span", { class: "counts" },
      STATES.filter((s) => values && values[s]).map((s) => el("span", {}, badge(s, s), ` ${values[s]}`)));
  }

  function table(headings, rows) {
    return el("table", {},
      el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))));
  }

  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function show(...children) {
    const main = document.getElementById("main");
    main.replaceChildren(...children.flat(Infinity).filter(Boolean));
  }

  function failed(error) {
    show(el("p", { class: "error", role: "alert" }, String(error.message || error)));
  }

  function text(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  const enc = encodeURIComponent;
  return { STATES, el, getJSON, when, ago, stateOf, badge, counts, table, facts, show, failed, text, enc };
})();
