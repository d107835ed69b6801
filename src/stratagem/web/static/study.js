// The study around the games: the consent and instructions screen and the participant id (the
// page's ?pid=ID, or a short form) before the first game, the participant's games and running
// total with the last game's scores (read from the server, so they survive a reload), and a
// notice when the game on screen is no longer on the server (it answers 404 with "gone").
// A ?pid= link for another participant than the browser's session is another person: the server
// gives them a new session, this page clears the previous game from the screen and shows the
// consent again; while the previous participant's game is still in play, the page says so and
// offers to continue it or to leave it and start as the new participant. Consent is sent only
// when the person presses the button under the text. Loaded after common.js and before main.js,
// whose flow it leaves alone (a "stratagem:reset" event asks it to load the session afresh).
"use strict";

(function () {
  const S = window.Stratagem;
  const $ = (id) => document.getElementById(id);
  const fromUrl = (new URLSearchParams(window.location.search).get("pid") || "").trim() || null;
  let info = null;
  // while a link for another participant waits on a game in play: whose game, and whether the
  // person chose to continue it
  let switching = null;

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

  function detail(result) {
    const text = result.data && result.data.detail ? String(result.data.detail) : "";
    if (result.status === 429) {
      return "Too many requests: wait " + (result.retryAfter || "a few") + " s. " + text;
    }
    return text || "Something went wrong (" + result.status + ").";
  }

  // a message where the person looks: under the gate's form, else in a notice above the game
  function say(message) {
    const field = $("study-error");
    if (field) {
      field.textContent = message;
      return;
    }
    let node = $("study-notice");
    if (!node) {
      node = S.el("p", { id: "study-notice", class: "panel warning", role: "alert" });
      main().before(node);
    }
    node.textContent = message;
  }

  // the participant the link names: with issued ids, the id before its code (ID.CODE)
  function linked() {
    if (fromUrl === null || !info.issued_ids) return fromUrl;
    const cut = fromUrl.lastIndexOf(".");
    return cut > 0 ? fromUrl.slice(0, cut) : fromUrl;
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
    const form = S.el("form", { on: { submit: (event) => {
      event.preventDefault();
      serial(join);
    } } });
    if (info.ask_participant) {
      form.append(S.el("label", { for: "participant" }, "Participant id:"),
        S.el("input", { id: "participant", type: "text", maxlength: "200", autocomplete: "off",
          value: info.participant || fromUrl || "" }));
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

  // the previous participant's game is in play: continue it, or leave it and start as fromUrl
  function switchPanel() {
    let node = $("study-switch");
    if (!node) {
      node = S.el("section", { id: "study-switch", class: "panel", role: "alert" });
      main().before(node);
    }
    const whose = switching.from ? "Participant " + switching.from + "'s game" : "A game";
    const playing = $("end").hidden;
    const name = linked();
    const text = "This link is for participant " + name + ". " + whose +
      (playing ? " is still in play in this browser; starting as " + name +
        " ends it (it is recorded as abandoned)." : " has ended in this browser.");
    const buttons = S.el("p", {});
    if (!switching.continued) {
      buttons.append(S.el("button", { id: "switch-continue", type: "button", class: "secondary",
        on: { click: () => { switching.continued = true; render(); } } },
      "Continue that game"), " ");
    }
    buttons.append(S.el("button", { id: "switch-start", type: "button",
      on: { click: () => serial(() => switchTo(true)) } }, "Start as participant " + name));
    node.replaceChildren(S.el("p", { id: "switch-text" }, text), buttons);
    main().hidden = !switching.continued;
  }

  // another participant than the session's: a new session on the server (the previous game is
  // left first when ``leave``), then a clean screen and that participant's own consent
  async function switchTo(leave) {
    const body = { participant: fromUrl };
    if (leave) body.leave = true;
    const result = await api("POST", "/api/study", body);
    if (result.ok) {
      switching = null;
      for (const id of ["study-switch", "study-notice", "study-gate"]) {
        const node = $(id);
        if (node) node.remove();
      }
      info = result.data;
      document.dispatchEvent(new CustomEvent("stratagem:reset"));
      render();
    } else if (result.status === 409) {
      switching = switching || { from: info.participant, continued: false };
      render();
    } else {
      main().hidden = true;
      say("The link's participant id was refused: " + detail(result));
    }
  }

  async function join() {
    const input = $("participant");
    const body = { consent: info.consent !== null };
    const pid = input ? input.value.trim() : fromUrl;
    if (pid) body.participant = pid;
    const before = info.participant;
    const result = await api("POST", "/api/study", body);
    if (result.ok) {
      info = result.data;
      if (before !== null && info.participant !== before) {
        document.dispatchEvent(new CustomEvent("stratagem:reset"));
      }
      render();
    } else {
      say(detail(result));
    }
  }

  function render() {
    gate();
    tally();
    if (switching) switchPanel();
  }

  // what reads or changes the study runs one at a time, in order: a refresh that read the
  // previous participant's state never switches participants a second time, nor undoes a join
  let queue = Promise.resolve();

  function serial(task) {
    const run = queue.then(task, task);
    queue = run.catch(() => {});
    return run;
  }

  function refresh() {
    return serial(refreshOnce);
  }

  async function refreshOnce() {
    const result = await api("GET", "/api/study");
    if (!result.ok) {
      main().hidden = false;
      return;
    }
    info = result.data;
    const need = needs();
    const other = fromUrl !== null && info.participant !== linked();
    const waiting = switching !== null && switching.continued;
    if (other && !waiting && (info.participant !== null || (!need.pid && !need.consent))) {
      await switchTo(false);
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
