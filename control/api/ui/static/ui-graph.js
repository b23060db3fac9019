// A stack's dependency graph with Cytoscape: nodes coloured by state; a nested stack or group is one
// box with its members' counts, which a click opens in place (and closes again); the resource list links its page.
"use strict";
window.Anneal.graph = (function () {
  const { getJSON, enc, STATES } = window.Anneal;
  const COLOURS = { COMPLETE: "#2e7d32", FAILED: "#c62828", IN_PROGRESS: "#1565c0", INIT: "#9e9e9e" };

  function caption(node) {
    if (!node.counts || node.status === "") return node.label;  // a type node's label has its count
    const parts = STATES.filter((s) => node.counts[s]).map((s) => `${node.counts[s]} ${s.toLowerCase()}`);
    return `${node.label}\n[${parts.join(", ") || "empty"}]`;
  }

  /** Cytoscape elements of *data*; inside an opened box, ids are prefixed by the box's id. */
  function elements(data, parent) {
    const id = (raw) => (parent ? `${parent}/${raw}` : raw);
    const nodes = data.nodes.map((n) => ({
      group: "nodes", data: { ...n, id: id(n.id), parent, caption: caption(n) } }));
    const edges = data.edges.map((e) => ({
      group: "edges", data: { id: `${id(e.source)}>${id(e.target)}`, source: id(e.source), target: id(e.target) } }));
    return nodes.concat(edges);
  }

  const STYLE = [
    { selector: "node", style: {
      "background-color": "#9e9e9e", label: "data(caption)", "text-wrap": "wrap", "font-size": 10,
      "text-valign": "bottom", "text-margin-y": 4, width: 22, height: 22, color: "#1d232a" } },
    ...Object.entries(COLOURS).map(([state, colour]) => (
      { selector: `node[state = "${state}"]`, style: { "background-color": colour } })),
    { selector: "node[size]", style: { shape: "round-rectangle", width: 34, height: 26 } },
    { selector: "node:parent", style: {
      "background-opacity": 0.08, "border-width": 2, "border-color": "data(border)", "text-valign": "top",
      "text-margin-y": -4, padding: 12 } },
    { selector: "node[?old]", style: { opacity: 0.45, "border-width": 2, "border-style": "dashed", "border-color": "#5f6b76" } },
    { selector: "edge", style: {
      width: 1.2, "line-color": "#b0b8c0", "target-arrow-color": "#b0b8c0", "target-arrow-shape": "triangle",
      "curve-style": "bezier" } },
  ];

  function layout(cy) {
    cy.layout({ name: "breadthfirst", directed: true, spacingFactor: 1.1, padding: 16, animate: false }).run();
  }

  /** Draw *data* (GET /ui/api/stacks/{name}/graph) into *container*; a click on a deployment calls
   * *openDeployment*, on a type's node (a big stack's graph) *openType* with the type. */
  function draw(container, data, openDeployment, openType) {
    const cy = window.cytoscape({
      container, elements: elements(data), style: STYLE, wheelSensitivity: 0.3, minZoom: 0.05, maxZoom: 1.5 });
    const opened = new Map();  // box id -> nested stack name, for the boxes opened in place

    /** New data for a node already drawn (its id and parent stay: Cytoscape changes those only by moving it). */
    function refresh(data) {
      const rest = { ...data };
      delete rest.id;
      delete rest.parent;
      cy.getElementById(data.id).data(rest);
    }

    async function fill(boxId, name) {
      const inner = await getJSON(`/ui/api/stacks/${enc(name)}/graph`);
      if (opened.get(boxId) !== name) return false;  // closed while its members were being read
      const box = cy.getElementById(boxId);
      if (box.empty()) {  // gone from the stack since it was opened
        opened.delete(boxId);
        return false;
      }
      box.data("border", COLOURS[box.data("state")] || COLOURS.INIT);
      const have = new Set(box.children().map((n) => n.id()));
      const next = elements(inner, boxId);
      const same = next.filter((e) => e.group === "nodes").every((e) => have.has(e.data.id)) &&
        have.size === inner.nodes.length;
      if (same) {
        for (const e of next) if (e.group === "nodes") refresh(e.data);
        return false;
      }
      box.descendants().remove();
      cy.add(next);
      return true;
    }

    /** Run *change*, the container marked busy until the graph is laid out again (the browser test waits on it). */
    async function busy(change) {
      container.dataset.busy = String(Number(container.dataset.busy || 0) + 1);
      try {
        await change();
      } finally {
        container.dataset.busy = String(Number(container.dataset.busy) - 1);
      }
    }

    async function toggle(node) {
      if (opened.has(node.id())) {
        opened.delete(node.id());
        for (const id of [...opened.keys()]) if (id.startsWith(`${node.id()}/`)) opened.delete(id);
        node.descendants().remove();
      } else {
        opened.set(node.id(), node.data("nested"));
        await fill(node.id(), node.data("nested"));
      }
      layout(cy);
    }

    cy.on("tap", "node", (event) => {
      event.stopPropagation();  // a click inside an opened box is not a click on the box too
      const node = event.target.data();
      if (node.nested) busy(() => toggle(event.target)).catch(window.Anneal.failed);
      else if (node.deployment) openDeployment(node);
      else if (node.status === "" && node.size && openType) openType(node.type);
    });

    async function update(next) {
      const top = cy.nodes().filter((n) => !n.data("parent"));
      const same = next.nodes.length === top.length && next.nodes.every((n) => cy.getElementById(n.id).nonempty());
      if (!same) {
        cy.elements().remove();
        cy.add(elements(next));
      } else {
        for (const n of next.nodes) refresh({ ...n, caption: caption(n) });
      }
      let moved = !same;
      for (const [id, name] of opened) moved = (await fill(id, name)) || moved;
      if (moved) layout(cy);
    }

    layout(cy);
    window.annealGraph = cy;  // read by the browser test (tests/integration/test_ui_browser.py)
    return { cy, update: (next) => busy(() => update(next)) };
  }

  return { draw, COLOURS };
})();
