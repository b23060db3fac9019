// A stack's dependency graph with Cytoscape: nodes coloured by state, nested stacks and groups as one node.
"use strict";
window.Anneal.graph = (function () {
  const COLOURS = { COMPLETE: "#2e7d32", FAILED: "#c62828", IN_PROGRESS: "#1565c0", INIT: "#9e9e9e" };

  function label(node) {
    if (!node.counts || node.status === "") return node.label;  // a type node's label has its count
    const parts = window.Anneal.STATES.filter((s) => node.counts[s]).map((s) => `${node.counts[s]} ${s.toLowerCase()}`);
    return `${node.label}\n[${parts.join(", ") || "empty"}]`;
  }

  function elements(data) {
    const nodes = data.nodes.map((n) => ({ group: "nodes", data: { ...n, caption: label(n) } }));
    const edges = data.edges.map((e) => ({ group: "edges", data: { id: `${e.source}>${e.target}`, ...e } }));
    return nodes.concat(edges);
  }

  const STYLE = [
    { selector: "node", style: {
      "background-color": "#9e9e9e", label: "data(caption)", "text-wrap": "wrap", "font-size": 10,
      "text-valign": "bottom", "text-margin-y": 4, width: 22, height: 22, color: "#1d232a" } },
    ...Object.entries(COLOURS).map(([state, colour]) => (
      { selector: `node[state = "${state}"]`, style: { "background-color": colour } })),
    { selector: "node[size]", style: { shape: "round-rectangle", width: 34, height: 26 } },
    { selector: "node[?old]", style: { opacity: 0.45, "border-width": 2, "border-style": "dashed", "border-color": "#5f6b76" } },
    { selector: "edge", style: {
      width: 1.2, "line-color": "#b0b8c0", "target-arrow-color": "#b0b8c0", "target-arrow-shape": "triangle",
      "curve-style": "bezier" } },
  ];

  function layout(cy) {
    cy.layout({ name: "breadthfirst", directed: true, spacingFactor: 1.1, padding: 16, animate: false }).run();
  }

  /** Draw *data* (GET /ui/api/stacks/{name}/graph) into *container*; returns {cy, update(data)}. */
  function draw(container, data, onTap) {
    const cy = window.cytoscape({ container, elements: elements(data), style: STYLE, wheelSensitivity: 0.3 });
    layout(cy);
    cy.on("tap", "node", (event) => onTap(event.target.data()));
    function update(next) {
      const same = next.nodes.length === cy.nodes().length && next.nodes.every((n) => cy.getElementById(n.id).nonempty());
      if (!same) {
        cy.elements().remove();
        cy.add(elements(next));
        layout(cy);
        return;
      }
      for (const n of next.nodes) cy.getElementById(n.id).data({ ...n, caption: label(n) });
    }
    window.annealGraph = cy;  // read by the browser test (tests/integration/test_ui_browser.py)
    return { cy, update };
  }

  return { draw, COLOURS };
})();
