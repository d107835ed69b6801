// The page's flow: start a game, show the state, submit the person's turns, poll while the
// model thinks (showing for how long), offer a retry when the model is unavailable or past its
// time, leave a game, show the score and "play again". A "stratagem:reset" event (study.js: another
// participant in this browser, a new session) clears the screen and loads the session afresh.
"use strict";

(function () {
  const S = window.Stratagem;
  const $ = (id) => document.getElementById(id);
  // the page's polling pace; the server's per-session read limit is sized to it
  const POLL_THINKING_MS = 300;
  const POLL_IDLE_MS = 20000;
  let game = null;
  let renderer = null;
  let state = null;
  let received = 0; // when ``state`` arrived (performance.now())
  let timer = null;
  let ticker = null;
  let busy = false;
  let left = false; // the person left the shown game
  let focusId = null; // the control to give the focus back to once it is enabled again
  let generation = 0; // a reset outdates what was loading or polling for the previous session

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

  // the focused control (or the box its button names in data-focus) gets the focus back after
  // the board is drawn again: a person keeps typing after Send
  function remember() {
    const active = document.activeElement;
    if (active && active.id && $("board").contains(active)) {
      focusId = active.dataset.focus || active.id;
    }
  }

  function refocus() {
    const node = focusId ? $(focusId) : null;
    if (node && !node.disabled) node.focus();
  }

  function thinkingText() {
    const seconds = Math.floor(state.thinking_seconds + (performance.now() - received) / 1000);
    const limit = state.model_timeout ? " (it has up to " + state.model_timeout + " s)" : "";
    return "The model is thinking: " + seconds + " s" + limit;
  }

  function banner() {
    const node = $("banner");
    node.replaceChildren();
    node.className = "";
    clearInterval(ticker);
    if (state.over) {
      node.textContent = !state.abandoned ? "Game over."
        : left ? "You left this game." : "This game was abandoned.";
    } else if (state.model_unavailable) {
      node.className = "unavailable";
      const why = state.model_late
        ? " The model gave no answer within " + state.model_timeout + " s." : "";
      node.append(
        S.el("span", { id: "unavailable", text: "Model unavailable, retry." + why }), " ",
        S.el("button", { id: "retry", type: "button", on: { click: retry } }, "Retry"),
      );
    } else if (state.thinking && !state.your_turn) {
      node.className = "thinking";
      node.append(S.el("span", { id: "elapsed", text: thinkingText() }));
      ticker = setInterval(() => { $("elapsed").textContent = thinkingText(); }, 1000);
    } else if (state.your_turn) {
      node.textContent = state.thinking ? "Your move (the model is choosing too)." : "Your turn.";
    } else {
      node.textContent = "Waiting for the model.";
    }
  }

  function show(next) {
    const redraw = !state || next.game_id !== state.game_id || next.version !== state.version;
    if (state && next.game_id !== state.game_id) left = false;
    state = next;
    received = performance.now();
    $("start").hidden = true;
    banner();
    if (redraw) {
      const kept = drafts();
      remember();
      const board = $("board");
      board.replaceChildren();
      renderer.render(state, board, { move: move, confirm: S.confirm });
      restore(kept);
      refocus();
      document.body.dataset.version = String(state.version);
    }
    $("end").hidden = !state.over;
    leaveBar();
    schedule();
  }

  function schedule() {
    clearTimeout(timer);
    if (!state || state.over) return;
    const waiting = state.thinking || (!state.your_turn && !state.model_unavailable);
    timer = setTimeout(poll, waiting ? POLL_THINKING_MS : POLL_IDLE_MS);
  }

  // "Leave this game", then a confirmation: the game ends and is stored as abandoned
  function leaveBar() {
    const bar = $("leave-bar");
    const live = !!state && !state.over;
    bar.hidden = !live;
    if (!live) bar.replaceChildren();
    else if (!bar.firstChild) bar.append(leaveButton());
  }

  function leaveButton() {
    return S.el("button", { id: "leave", type: "button", class: "secondary", on: { click: () => {
      $("leave-bar").replaceChildren(S.confirm("confirm-leave", "Leave this game? It ends now " +
        "and is recorded as abandoned.", "Leave", leave,
        () => $("leave-bar").replaceChildren(leaveButton())));
    } } }, "Leave this game");
  }

  async function leave() {
    showError("");
    const path = "/api/games/" + encodeURIComponent(state.game_id) + "/leave";
    const result = await S.api("POST", path);
    if (result.ok) {
      left = true;
      show(result.data);
    } else {
      $("leave-bar").replaceChildren(leaveButton());
      showError(explain(result));
    }
  }

  async function poll() {
    if (!state) return;
    const run = generation;
    const result = await S.api("GET", "/api/games/" + encodeURIComponent(state.game_id));
    if (run !== generation) return;
    if (result.ok) show(result.data);
    else {
      showError(explain(result));
      timer = setTimeout(poll, 2000);
    }
  }

  async function move(body) {
    if (busy || !state) return;
    busy = true;
    remember();
    showError("");
    const path = "/api/games/" + encodeURIComponent(state.game_id) + "/turn";
    const run = generation;
    const result = await S.api("POST", path, body);
    busy = false;
    if (run !== generation) return false;
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

  async function load() {
    const run = ++generation;
    const result = await S.api("GET", "/api/session");
    if (run !== generation) return;
    if (!result.ok) {
      showError(explain(result));
      return;
    }
    game = result.data.game;
    renderer = S.renderers[result.data.board];
    $("title").textContent = renderer.title || game;
    $("opponent").textContent = "against " + result.data.agent;
    if (result.data.live) {
      const live = await S.api("GET", "/api/games/" + encodeURIComponent(result.data.live));
      if (run !== generation) return;
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

  // another person in this browser: nothing of the previous session's game stays on screen
  function reset() {
    clearTimeout(timer);
    clearInterval(ticker);
    state = null;
    left = false;
    busy = false;
    $("board").replaceChildren();
    $("banner").replaceChildren();
    $("banner").className = "";
    $("end").hidden = true;
    $("leave-bar").hidden = true;
    $("leave-bar").replaceChildren();
    showError("");
    load();
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("new-game").addEventListener("click", newGame);
    $("play-again").addEventListener("click", newGame);
    load();
  });
  document.addEventListener("stratagem:reset", reset);
})();
