// Bargaining: the item and its price range, the person's role and reservation value, the
// public log, and controls to list / offer, accept, reject, send a message or walk away.
"use strict";

(function () {
  const S = window.Stratagem;
  const el = S.el;
  const money = S.money;

  function describe(e) {
    const who = e.who === "you" ? "You" : "The model";
    let text;
    if (e.kind === "listing") text = "listed the item at " + money(e.price);
    else if (e.kind === "offer") text = "offered " + money(e.price);
    else if (e.kind === "respond") text = (e.accept ? "accepted" : "rejected") + " the offer of " + money(e.price);
    else if (e.kind === "message") text = "said: ";
    else if (e.kind === "quit") text = "walked away";
    else if (e.kind === "wait_time") text = "paused for " + e.duration + " time units";
    else if (e.kind === "search") text = "looked up the price history";
    else text = e.kind;
    const item = el("li", { class: e.who }, el("span", { class: "who", text: "t=" + e.t + " " + who }), text);
    if (e.kind === "message") item.append(el("span", { class: "text", text: e.text }));
    if (e.side_offer) item.append(el("span", { class: "text", text: " (side offer: " + e.side_offer + ")" }));
    return item;
  }

  function outcome(state, board) {
    const o = state.outcome;
    let line;
    if (o.deal) {
      line = "Deal at " + money(o.price) + " (accepted by " + (o.accepted_by === "you" ? "you" : "the model") + ").";
    } else if (o.end_reason === "quit") {
      line = "No deal: the negotiation ended when a party walked away.";
    } else {
      line = "No deal: the round limit was reached.";
    }
    board.append(el("section", { class: "panel outcome", id: "outcome" },
      el("h2", { text: "Result" }), el("p", { id: "result-line", text: line }),
      el("p", {}, "Your utility: ", el("span", { id: "score", class: "big", text: money(o.your_utility) }),
        " · the model's utility: ", el("span", { id: "model-score", text: money(o.model_utility) }))));
  }

  // the game ends after round max_rounds: say so on the person's last turn (as the model's
  // prompt does on its own)
  function lastTurn(b) {
    if (b.round >= b.max_rounds) {
      return "Last round: if no deal is made in this turn, the negotiation ends with no deal.";
    }
    if (b.round + 1 === b.max_rounds) {
      return "This is your last turn: the model has the final round, then the negotiation ends.";
    }
    return null;
  }

  // what accepting ``price`` costs the person, when it is past their reservation value
  function loss(b, price) {
    const lost = b.role === "seller" ? b.reservation - price : price - b.reservation;
    return lost > 0 ? lost : 0;
  }

  function render(state, board, actions) {
    const b = state.board;
    const seller = b.role === "seller";
    board.append(el("section", { class: "panel" },
      el("h2", { id: "item-title", text: b.item.title }),
      el("p", { class: "muted", text: b.item.category + ". " + b.item.description }),
      el("p", { text: "Historical price range: " + money(b.item.low) + " to " + money(b.item.high) + " (the model sees it too)." }),
      el("p", { id: "role" }, "You are the ", el("strong", { text: b.role }), ". Your reservation value is ",
        el("strong", { id: "reservation", text: money(b.reservation) }),
        seller ? ": the lowest price you can accept (private)." : ": the highest price you can pay (private)."),
      el("p", { class: "muted", text: "Round " + b.round + " of " + b.max_rounds + "." })));

    const log = el("ol", { id: "log", class: "dialogue" }, b.log.map(describe));
    board.append(el("section", { class: "panel" }, el("h2", { text: "Negotiation" }), log));
    if (state.outcome) {
      outcome(state, board);
      return;
    }
    if (state.over) return;

    const open = state.your_turn;
    const offers = [];
    if (b.their_offer !== null) offers.push("The model's open offer: " + money(b.their_offer) + ".");
    if (b.your_offer !== null) offers.push("Your open offer: " + money(b.your_offer) + ".");
    const message = el("input", { id: "message", type: "text", maxlength: "1000", "data-keep": true,
      "data-clear": true, placeholder: "A message (optional with an offer)", autocomplete: "off", disabled: !open });
    const price = el("input", { id: "price", type: "number", min: "0.01", step: "0.01", "data-keep": true,
      placeholder: "price", disabled: !open });
    const note = () => (message.value.trim() ? { message: message.value } : {});
    const offer = el("button", { id: "offer", type: "submit", "data-focus": "message", disabled: !open },
      b.listing ? "List at this price" : "Offer");
    const form = el("form", { id: "offer-form", on: { submit: (event) => {
      event.preventDefault();
      actions.move(Object.assign({ kind: "offer", price: Number(price.value) }, note()));
    } } }, el("span", { text: "$" }), price, offer);
    const canRespond = open && !b.listing && b.their_offer !== null;
    const accept = () => actions.move(Object.assign({ kind: "accept" }, note()));
    const buttons = el("div", { class: "row" });
    const acceptOrAsk = () => {
      const lost = loss(b, b.their_offer);
      if (!lost) return accept();
      const side = b.role === "seller" ? "below" : "above";
      buttons.before(actions.confirm("confirm-accept", "Accepting " + money(b.their_offer) + " is " + side +
        " your reservation value of " + money(b.reservation) + ": you would lose " + money(lost) +
        ". Accept anyway?", "Accept anyway", accept));
    };
    buttons.append(
      el("button", { id: "accept", type: "button", disabled: !canRespond,
        on: { click: () => { if (!document.getElementById("confirm-accept")) acceptOrAsk(); } } },
        b.their_offer !== null ? "Accept " + money(b.their_offer) : "Accept"),
      " ",
      el("button", { id: "reject", type: "button", class: "secondary", disabled: !canRespond,
        on: { click: () => actions.move(Object.assign({ kind: "reject" }, note())) } }, "Reject"),
      " ",
      el("button", { id: "send", type: "button", class: "secondary", "data-focus": "message",
        disabled: !open || b.listing,
        on: { click: () => actions.move({ kind: "message", text: message.value }) } }, "Send message only"),
      " ",
      el("button", { id: "quit", type: "button", class: "secondary", disabled: !open || b.listing,
        on: { click: () => actions.move({ kind: "quit" }) } }, "Walk away"));
    const warning = open ? lastTurn(b) : null;
    board.append(el("section", { class: "panel", id: "controls" },
      warning ? el("p", { id: "last-round", class: "warning", text: warning }) : null,
      el("p", { id: "offers", text: offers.join(" ") || (b.listing ? "List the item: set your asking price." : "No open offer.") }),
      message, form, buttons));
  }

  function options() {
    return el("label", {}, "Your role: ",
      el("select", { id: "role-choice" },
        el("option", { value: "" }, "random"), el("option", { value: "0" }, "seller"),
        el("option", { value: "1" }, "buyer")));
  }

  function startBody() {
    const choice = document.getElementById("role-choice");
    if (!choice || choice.value === "") return {};
    return { seat: Number(choice.value) };
  }

  S.register("bargaining", {
    title: "Bargaining",
    intro: "Buy or sell one item against the model. You know your own reservation value; " +
      "the model knows its own. Offers are binding; accepting closes the deal.",
    render: render,
    options: options,
    startBody: startBody,
  });
})();
