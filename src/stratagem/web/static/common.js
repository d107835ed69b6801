// Shared helpers of the play page. Every text from the server (the model's messages, the
// person's own, item names) goes into the page through textContent or text nodes only, never
// as HTML: with the Content-Security-Policy this is what keeps model output inert.
"use strict";

window.Stratagem = (function () {
  const renderers = {};

  // el("p", {class: "x", text: "hi"}, child, ...): a new element; strings become text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "on") {
        for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
      } else if (key === "class") node.className = value;
      else if (key === "href" || key.startsWith("on")) throw new Error("not allowed: " + key);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  async function api(method, path, body) {
    const init = { method: method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      return { ok: false, status: 0, data: { detail: "the server cannot be reached" } };
    }
    let data = {};
    try {
      data = await response.json();
    } catch (err) {
      data = {};
    }
    return {
      ok: response.ok,
      status: response.status,
      data: data || {},
      retryAfter: response.headers.get("Retry-After"),
    };
  }

  function money(x) {
    const value = Number(x);
    return (value < 0 ? "-$" : "$") + Math.abs(value).toFixed(2);
  }

  function register(game, renderer) {
    renderers[game] = renderer;
  }

  // A question asked in the page (element ``id``): ``yes`` runs on its first button (id-yes),
  // ``no`` on Cancel (id-no); either removes the question. Never window.confirm: it blocks.
  function confirm(id, question, yesLabel, yes, no) {
    const box = el("div", { id: id, class: "confirm", role: "alertdialog" },
      el("span", { id: id + "-text", text: question }), " ");
    const answer = (run) => () => {
      box.remove();
      if (run) run();
    };
    box.append(
      el("button", { id: id + "-yes", type: "button", on: { click: answer(yes) } }, yesLabel), " ",
      el("button", { id: id + "-no", type: "button", class: "secondary", on: { click: answer(no) } },
        "Cancel"));
    return box;
  }

  return {
    el: el, api: api, money: money, register: register, renderers: renderers, confirm: confirm,
  };
})();
