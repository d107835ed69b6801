// The study around the games: the consent and instructions screen and the participant id (the
// page's ?pid=ID, or a short form) before the first game, the participant's games and running
// total with the last game's scores (read from the server, so they survive a reload), and a
// notice when the game on screen is no longer on the server (it answers 404 with "gone").
// Loaded after common.js and before main.js, whose flow it leaves alone.
"use strict";

(function () {
  const S = window.Stratagem;
  const $ = (id) => document.getElementById(id);
  const fromUrl = new URLSearchParams(window.location.search).get("pid");
  let info = null;

  const api = S.api;
  S.api = async function (method, path, body) {
    const result = await api(method, path, body);
    if (result.status === 404 && result.data && result.data.gone) gone(result.data);
    return result;
  };

  function gone(data) {
    const banner = $("banner");
    banner.className = "";
    banner.textContent = "This game is no longer on the server" +
      (data.status ? " (it was " + data.status + ")" : "") + ". Start a new game.";
    $("board").replaceChildren();
    $("end").hidden = true;
    $("start").hidden = false;
  }

  function main() {
    return document.querySelector("main");
  }

  function number(x) {
    return String(Math.round(Number(x) * 100) / 100);
  }

  function needs() {
    return {
      pid: info.ask_participant && !info.participant,
      consent: info.consent !== null && !info.consented,
    };
  }

  function gate() {
    const need = needs();
    let node = $("study-gate");
    if (!need.pid && !need.consent) {
      if (node) node.remove();
      main().hidden = false;
      return;
    }
    main().hidden = true;
    if (node) return;
    const form = S.el("form", { on: { submit: (event) => { event.preventDefault(); join(); } } });
    if (info.ask_participant) {
      form.append(S.el("label", { for: "participant" }, "Participant id:"),
        S.el("input", { id: "participant", type: "text", maxlength: "64", autocomplete: "off",
          value: fromUrl || "" }));
    }
    form.append(S.el("button", { id: "agree", type: "submit" },
      info.consent !== null ? "I agree, continue" : "Continue"));
    node = S.el("section", { id: "study-gate", class: "panel" },
      info.consent !== null ? S.el("p", { id: "consent-text", class: "text" }, info.consent) : null,
      form, S.el("p", { id: "study-error", role: "alert" }));
    main().before(node);
  }

  function tally() {
    const shown = info.participant !== null || info.finished + info.abandoned > 0;
    let node = $("study");
    if (!shown) {
      if (node) node.remove();
      return;
    }
    if (!node) {
      node = S.el("section", { id: "study", class: "panel" },
        S.el("span", { id: "study-who" }),
        "Games played: ", S.el("span", { id: "study-games" }),
        " · Your total: ", S.el("span", { id: "study-total" }),
        S.el("p", { id: "study-last", class: "muted" }));
      main().before(node);
    }
    $("study-who").textContent = info.participant ? "Participant " + info.participant + " · " : "";
    $("study-games").textContent = String(info.finished);
    $("study-total").textContent = number(info.total);
    const last = info.last;
    $("study-last").textContent = !last ? "" : last.status === "finished"
      ? "Last game: you " + number(last.your_score) + ", the model " + number(last.model_score) + "."
      : "Last game: abandoned.";
  }

  async function join() {
    const input = $("participant");
    const body = { consent: info.consent !== null };
    const pid = input ? input.value.trim() : fromUrl;
    if (pid) body.participant = pid;
    const result = await api("POST", "/api/study", body);
    if (result.ok) {
      info = result.data;
      render();
    } else {
      $("study-error").textContent = String(result.data.detail || "Something went wrong.");
    }
  }

  function render() {
    gate();
    tally();
  }

  async function refresh() {
    const result = await api("GET", "/api/study");
    if (!result.ok) {
      main().hidden = false;
      return;
    }
    info = result.data;
    const need = needs();
    if (fromUrl && info.participant !== fromUrl && !need.pid && !need.consent) {
      await join();
      return;
    }
    render();
    if (info.pending) setTimeout(refresh, 300);
  }

  document.addEventListener("DOMContentLoaded", function () {
    main().hidden = true;
    // the game on screen ended (or a reload shows an ended one): count it
    new MutationObserver(function () {
      if (!$("end").hidden) refresh();
    }).observe($("end"), { attributes: true, attributeFilter: ["hidden"] });
    refresh();
  });
})();
