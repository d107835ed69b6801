// Games whose every turn is a choice of action: the iterated Prisoner's Dilemma and Kuhn
// poker. One button per legal action; the rounds (hands) played so far; the totals.
"use strict";

(function () {
  const S = window.Stratagem;
  const el = S.el;

  function buttons(state, actions) {
    return el("div", { id: "actions" }, state.legal.map((token) =>
      el("button", { id: "action-" + token, type: "button", disabled: !state.your_turn,
        on: { click: () => actions.move({ action: token }) } }, token)));
  }

  function totals(state, board) {
    const o = state.outcome;
    board.append(el("section", { class: "panel outcome", id: "outcome" }, el("h2", { text: "Result" }),
      el("p", {}, "Your total: ", el("span", { id: "score", class: "big", text: String(o.your_total) }),
        " · the model's total: " + o.model_total)));
  }

  function ipd(state, board, actions) {
    const b = state.board;
    board.append(el("section", { class: "panel" }, el("h2", { text: "Points per round" }),
      el("table", {}, el("thead", {}, el("tr", {}, ["You", "Model", "Your points", "Model's points"]
        .map((h) => el("th", { text: h })))),
      el("tbody", {}, b.payoffs.map((row) => el("tr", {}, [row.you, row.model, row.your_points,
        row.model_points].map((x) => el("td", { text: String(x) }))))))));
    board.append(el("section", { class: "panel" },
      el("h2", { text: "Round " + Math.min(b.round + 1, b.rounds_total) + " of " + b.rounds_total }),
      el("table", { id: "rounds" }, el("tbody", {}, b.rounds.map((r, i) => el("tr", {},
        [String(i + 1), "you " + r.you, "model " + r.model, "+" + r.your_points + " / +" + r.model_points]
          .map((x) => el("td", { text: x })))))),
      el("p", { text: "Score: you " + b.your_total + ", model " + b.model_total + "." })));
    if (state.outcome) totals(state, board);
    else if (!state.over) board.append(el("section", { class: "panel", id: "controls" }, buttons(state, actions)));
  }

  function kuhn(state, board, actions) {
    const b = state.board;
    if (b.card !== null) {
      board.append(el("section", { class: "panel" },
        el("h2", { text: "Hand " + (b.hand + 1) + " of " + b.hands }),
        el("p", {}, "Your card: ", el("span", { id: "card", class: "big", text: b.card })),
        el("p", { class: "muted", text: b.first ? "You act first this hand." : "The model acts first this hand." }),
        el("p", { id: "betting", text: b.betting.length
          ? "Betting: " + b.betting.map((x) => x.who + " " + x.action).join(", ")
          : "No betting yet." })));
    }
    board.append(el("section", { class: "panel" }, el("h2", { text: "Hands played" }),
      el("table", { id: "hands" }, el("tbody", {}, b.past.map((h, i) => el("tr", {},
        [String(i + 1), "you " + h.card, h.model_card ? "model " + h.model_card : "model ?",
          h.betting.map((x) => x.who + " " + x.action).join(", "),
          (h.your_chips > 0 ? "+" : "") + h.your_chips].map((x) => el("td", { text: x })))))),
      el("p", { text: "Your chips: " + (b.your_total > 0 ? "+" : "") + b.your_total + "." })));
    if (state.outcome) totals(state, board);
    else if (!state.over) board.append(el("section", { class: "panel", id: "controls" }, buttons(state, actions)));
  }

  S.register("ipd", {
    title: "Iterated Prisoner's Dilemma",
    intro: "Eight rounds: each round you and the model choose at the same time, COOPERATE or DEFECT.",
    render: ipd,
  });
  S.register("kuhn", {
    title: "Kuhn poker",
    intro: "Six hands of Kuhn poker (J < Q < K, ante 1) against the model.",
    render: kuhn,
  });
})();
