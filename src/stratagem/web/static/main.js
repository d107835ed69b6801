// The page's flow: start a game, show the state, submit the person's turns, poll while the
// model thinks, offer a retry when the model is unavailable, show the score and "play again".
"use strict";

(function () {
  const S = window.Stratagem;
  const $ = (id) => document.getElementById(id);
  let game = null;
  let renderer = null;
  let state = null;
  let timer = null;
  let busy = false;

  function showError(message) {
    $("error").textContent = message || "";
  }

  function explain(result) {
    const detail = result.data && result.data.detail ? String(result.data.detail) : "";
    if (result.status === 429) {
      return "Too many requests: wait " + (result.retryAfter || "a few") + " s. " + detail;
    }
    if (result.status === 409) return "Please wait: " + detail;
    if (result.status === 0) return "The server cannot be reached.";
    return detail || "Something went wrong (" + result.status + ").";
  }

  // inputs marked data-keep keep what the person typed when the board is drawn again
  function drafts() {
    const kept = {};
    for (const node of document.querySelectorAll("[data-keep]")) kept[node.id] = node.value;
    return kept;
  }

  function restore(kept) {
    for (const [id, value] of Object.entries(kept)) {
      const node = $(id);
      if (node && value !== "") node.value = value;
    }
  }

  function banner() {
    const node = $("banner");
    node.replaceChildren();
    node.className = "";
    if (state.over) {
      node.textContent = state.abandoned ? "This game was abandoned." : "Game over.";
    } else if (state.model_unavailable) {
      node.className = "unavailable";
      node.append(
        S.el("span", { text: "Model unavailable, retry. " }),
        S.el("button", { id: "retry", type: "button", on: { click: retry } }, "Retry"),
      );
    } else if (state.thinking && !state.your_turn) {
      node.className = "thinking";
      node.textContent = "The model is thinking";
    } else if (state.your_turn) {
      node.textContent = state.thinking ? "Your move (the model is choosing too)." : "Your turn.";
    } else {
      node.textContent = "Waiting for the model.";
    }
  }

  function show(next) {
    const redraw = !state || next.game_id !== state.game_id || next.version !== state.version;
    state = next;
    $("start").hidden = true;
    banner();
    if (redraw) {
      const kept = drafts();
      const board = $("board");
      board.replaceChildren();
      renderer.render(state, board, { move: move });
      restore(kept);
      document.body.dataset.version = String(state.version);
    }
    $("end").hidden = !state.over;
    schedule();
  }

  function schedule() {
    clearTimeout(timer);
    if (!state || state.over) return;
    const waiting = state.thinking || (!state.your_turn && !state.model_unavailable);
    timer = setTimeout(poll, waiting ? 300 : 20000);
  }

  async function poll() {
    if (!state) return;
    const result = await S.api("GET", "/api/games/" + encodeURIComponent(state.game_id));
    if (result.ok) show(result.data);
    else {
      showError(explain(result));
      timer = setTimeout(poll, 2000);
    }
  }

  async function move(body) {
    if (busy || !state) return;
    busy = true;
    showError("");
    const path = "/api/games/" + encodeURIComponent(state.game_id) + "/turn";
    const result = await S.api("POST", path, body);
    busy = false;
    if (result.ok) {
      for (const node of document.querySelectorAll("[data-keep][data-clear]")) node.value = "";
      show(result.data);
    } else {
      showError(explain(result));
    }
    return result.ok;
  }

  async function retry() {
    showError("");
    const path = "/api/games/" + encodeURIComponent(state.game_id) + "/retry";
    const result = await S.api("POST", path);
    if (result.ok) show(result.data);
    else showError(explain(result));
  }

  async function newGame() {
    showError("");
    const body = renderer.startBody ? renderer.startBody() : {};
    const result = await S.api("POST", "/api/games", body);
    if (result.ok) {
      state = null;
      show(result.data);
    } else {
      showError(explain(result));
    }
  }

  async function start() {
    const result = await S.api("GET", "/api/session");
    if (!result.ok) {
      showError(explain(result));
      return;
    }
    game = result.data.game;
    renderer = S.renderers[result.data.board];
    $("title").textContent = renderer.title || game;
    $("opponent").textContent = "against " + result.data.agent;
    $("new-game").addEventListener("click", newGame);
    $("play-again").addEventListener("click", newGame);
    if (result.data.live) {
      const live = await S.api("GET", "/api/games/" + encodeURIComponent(result.data.live));
      if (live.ok) {
        show(live.data);
        return;
      }
    }
    $("intro").textContent = renderer.intro;
    const options = $("start-options");
    options.replaceChildren();
    if (renderer.options) options.append(renderer.options());
    $("start").hidden = false;
  }

  document.addEventListener("DOMContentLoaded", start);
})();
