// Any registered game, as a model in the person's seat would read it: the rules of their seat,
// their conversation with the game, the open prompt, then one button per legal token or a text
// answer for a free-form turn; the person's own points per round and the total at the end.
"use strict";

(function () {
  const S = window.Stratagem;
  const el = S.el;

  function signed(x) {
    return (x > 0 ? "+" : "") + x;
  }

  function conversation(b) {
    return el("ol", { id: "dialogue", class: "dialogue" }, b.chat.map((m) =>
      el("li", { class: m.who === "you" ? "you" : "model" },
        el("span", { class: "who", text: m.who === "you" ? "You" : "Game" }),
        el("span", { class: "text", text: m.text }))));
  }

  function controls(state, b, actions) {
    const open = state.your_turn;
    if (!b.free_form) {
      return el("div", { id: "actions" }, state.legal.map((token, i) =>
        el("button", { id: "action-" + i, type: "button", "data-token": token, disabled: !open,
          on: { click: () => actions.move({ action: token }) } }, token)));
    }
    const answer = el("textarea", { id: "answer", rows: "3", maxlength: "1000", "data-keep": true,
      "data-clear": true, placeholder: "Your answer, in the format the rules ask for…",
      disabled: !open });
    return el("form", { id: "answer-form", on: { submit: (event) => {
      event.preventDefault();
      actions.move({ text: answer.value });
    } } }, answer, el("button", { id: "send", type: "submit", "data-focus": "answer", disabled: !open },
      "Send"));
  }

  function render(state, board, actions) {
    const b = state.board;
    if (b.rules) {
      board.append(el("details", { class: "panel", id: "rules", open: !b.chat.length },
        el("summary", { text: "Rules of your seat" }), el("p", { class: "text", text: b.rules })));
    }
    board.append(el("section", { class: "panel" }, el("h2", { text: "The game so far" }),
      conversation(b),
      el("p", { class: "muted", id: "points", text: b.rounds.length
        ? "Your points: " + b.rounds.map((r) => signed(r.your_points)).join(", ") +
          " (total " + b.your_total + ")."
        : "No round finished yet." })));
    if (state.outcome) {
      const o = state.outcome;
      board.append(el("section", { class: "panel outcome", id: "outcome" },
        el("h2", { text: "Result" }),
        el("p", {}, "Your total: ", el("span", { id: "score", class: "big", text: String(o.your_total) }),
          " over " + o.rounds + (o.rounds === 1 ? " round." : " rounds."))));
      return;
    }
    if (state.over) return;
    const section = el("section", { class: "panel", id: "controls" });
    if (b.prompt !== null) {
      section.append(el("p", { id: "prompt", class: b.correction ? "text correction" : "text",
        text: b.prompt }));
    }
    section.append(controls(state, b, actions));
    board.append(section);
  }

  S.register("text", {
    title: null, // the game's id, from the server
    intro: "You play one seat against the model and read exactly what a model in your seat " +
      "would read: the rules, then the game's messages. Answer with the buttons, or in words " +
      "when the game asks for a free answer.",
    render: render,
  });
})();
