// Deal or No Deal: the items with the person's own values, the dialogue, a message box and a
// proposal form (the counts the person keeps; the model gets the rest).
"use strict";

(function () {
  const S = window.Stratagem;
  const el = S.el;

  function share(counts) {
    return counts[0] + " books, " + counts[1] + " hats, " + counts[2] + " balls";
  }

  function line(entry) {
    const who = entry.who === "you" ? "You" : "Model";
    if (entry.kind === "propose") {
      const text = entry.who === "you"
        ? "proposed to keep " + entry.text
        : "submitted its proposal (shown at the end)";
      return el("li", { class: entry.who + " note" }, el("span", { class: "who", text: who }), text);
    }
    return el("li", { class: entry.who }, el("span", { class: "who", text: who }),
      el("span", { class: "text", text: entry.text }));
  }

  function outcome(state, board) {
    const o = state.outcome;
    const panel = el("section", { class: "panel outcome", id: "outcome" }, el("h2", { text: "Result" }));
    if (o.end === "agreement") {
      panel.append(el("p", { id: "result-line", text: "Deal! You keep " + share(o.your_proposal) +
        ": " + o.your_points + " points to you." }));
    } else if (o.end === "aborted") {
      const who = o.aborted_by === "model" ? "The model" : "You";
      panel.append(el("p", { id: "result-line",
        text: who + " gave five faulty answers in a row: the game ended with no deal." }));
    } else {
      panel.append(el("p", { id: "result-line", text: "No deal: the proposals did not add up." }));
    }
    if (o.your_proposal && o.model_proposal && o.end !== "agreement") {
      panel.append(el("p", { text: "You asked for " + share(o.your_proposal) +
        "; the model asked for " + share(o.model_proposal) + "." }));
    } else if (o.model_proposal && o.end === "agreement") {
      panel.append(el("p", { text: "The model keeps " + share(o.model_proposal) + "." }));
    }
    panel.append(el("p", {}, "Your score: ", el("span", { id: "score", class: "big",
      text: String(o.your_score) }), " · the model's score: ",
      el("span", { id: "model-score", text: String(o.model_score) })));
    board.append(panel);
  }

  function render(state, board, actions) {
    const b = state.board;
    const rows = b.items.map((item) => el("tr", {},
      el("td", { text: item.name }), el("td", { text: String(item.count) }),
      el("td", { text: String(item.value) })));
    board.append(el("section", { class: "panel" },
      el("h2", { text: "The items" }),
      el("table", { id: "items" },
        el("thead", {}, el("tr", {}, el("th", { text: "Item" }), el("th", { text: "Count" }),
          el("th", { text: "Worth to you (each)" }))),
        el("tbody", {}, rows)),
      el("p", { id: "objective", class: "muted", text: b.objective +
        " The model values the items differently; you do not see its values." }),
      el("p", { class: "muted", text: (state.over
        ? "The dialogue took " + b.turn + " turns. "
        : "Turn " + Math.min(b.turn + 1, b.max_turns) + " of " + b.max_turns + ". ") +
        (b.first ? "You spoke first." : "The model spoke first.") })));

    const dialogue = el("ol", { id: "dialogue", class: "dialogue" }, b.dialogue.map(line));
    board.append(el("section", { class: "panel" }, el("h2", { text: "Dialogue" }), dialogue));
    if (state.outcome) {
      outcome(state, board);
      return;
    }
    if (state.over) return;

    const open = state.your_turn;
    const message = el("input", { id: "message", type: "text", maxlength: "1000", "data-keep": true,
      "data-clear": true, placeholder: "Write to the model…", autocomplete: "off",
      disabled: !open || !b.can_message });
    const send = el("button", { id: "send", type: "submit", "data-focus": "message",
      disabled: !open || !b.can_message }, "Send");
    const messageForm = el("form", { id: "message-form", on: { submit: (event) => {
      event.preventDefault();
      actions.move({ kind: "message", text: message.value });
    } } }, message, send);

    const inputs = b.items.map((item) => el("label", {}, item.name + " ",
      el("input", { id: "keep-" + item.name, type: "number", min: "0", max: String(item.count),
        step: "1", value: "0", "data-keep": true, disabled: !open || !b.can_propose })));
    const propose = el("button", { id: "propose", type: "submit",
      disabled: !open || !b.can_propose }, "Propose");
    const proposalForm = el("form", { id: "proposal-form", on: { submit: (event) => {
      event.preventDefault();
      const keep = {};
      for (const item of b.items) {
        keep[item.name] = Number(document.getElementById("keep-" + item.name).value);
      }
      actions.move({ kind: "propose", books: keep.books, hats: keep.hats, balls: keep.balls });
    } } }, el("span", { text: "I keep:" }), inputs, propose);

    // the model's proposal stays hidden until the end: what it gets is what it asked for, and
    // only if the two proposals add up to the whole pool
    const hint = b.model_proposed
      ? "The model has submitted its proposal (hidden until the end): now submit yours. If " +
        "the two proposals add up to the whole pool, that is the deal; otherwise no one scores."
      : "A proposal is the items you keep; the model gets the rest. Both must propose; " +
        "proposals that add up to the whole pool make a deal.";
    board.append(el("section", { class: "panel", id: "controls" },
      messageForm, proposalForm, el("p", { id: "hint", class: "muted", text: hint })));
  }

  S.register("dond", {
    title: "Deal or No Deal",
    intro: "Split books, hats and balls with the model. You see only your own values; agree " +
      "by chat, then both of you propose what you keep.",
    render: render,
  });
})();
