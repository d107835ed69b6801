"""A person is never stuck (RELIABILITY I7, I10): a model turn past its deadline becomes "model
unavailable, retry" whatever the backend, its late answer is dropped and the retry plays on; the
page shows how long the model has been thinking; twenty people behind one address polling at the
page's own pace are never refused."""

from __future__ import annotations

import re
import threading
import time

from stratagem.web.app import Limits

from .conftest import ORIGIN, other_client
from .test_api import STATIC, dond_model, dond_server


def test_a_model_turn_past_its_deadline_offers_a_retry_that_works(serve, dond_contexts):
    slow = threading.Event()  # while set, the model's next answer waits for ``release``
    release = threading.Event()
    returned = threading.Event()

    def model(chat):
        if slow.is_set():
            slow.clear()
            assert release.wait(30)
            returned.set()
            return "[message] A late answer that nobody should see."
        return dond_model(chat)

    server = dond_server(serve, dond_contexts, script=model, limits=Limits(model_timeout=1.5))
    state = server.new_game()
    gid = state["game_id"]
    assert state["model_timeout"] == 1.5 and state["your_turn"]
    lines = len(state["board"]["dialogue"])
    slow.set()
    r = server.turn(gid, {"kind": "message", "text": "hello?"})
    assert r.status_code == 200 and r.json()["thinking"]
    time.sleep(0.3)
    state = server.client.get(f"/api/games/{gid}").json()
    assert state["thinking"] and 0.2 <= state["thinking_seconds"] <= 1.5  # shown on the page
    deadline = time.monotonic() + 10
    while not state["model_unavailable"] and time.monotonic() < deadline:
        time.sleep(0.05)
        state = server.client.get(f"/api/games/{gid}").json()
    assert state["model_unavailable"] and state["model_late"]
    assert not state["thinking"] and not state["your_turn"] and not state["over"]
    assert server.human(gid).failure == "no answer within 1.5 s"
    # the late answer, once it comes, is dropped: the turn failed
    release.set()
    assert returned.wait(10)
    time.sleep(0.3)
    state = server.client.get(f"/api/games/{gid}").json()
    assert state["model_unavailable"] and len(state["board"]["dialogue"]) == lines + 1
    assert "late answer" not in str(state)
    # the retry asks again, and the game plays on to its end
    r = server.client.post(f"/api/games/{gid}/retry", headers={"Origin": ORIGIN})
    assert r.status_code == 200
    state = server.settle(gid)
    assert not state["model_unavailable"] and state["your_turn"]
    assert [d["text"] for d in state["board"]["dialogue"]][lines:] == [
        "hello?",
        "Books matter most to me.",
    ]
    server.turn(gid, {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    state = server.settle(gid)
    assert state["outcome"]["agreement"]
    assert server.service.store.records()[0].status == "finished"


def test_a_rule_based_opponent_has_the_same_deadline(serve):
    release = threading.Event()

    class Stalled:  # stands for any backend: the deadline does not ask which one
        name = "stalled"

        def __init__(self, inner):
            self.inner = inner

        def act(self, batch):
            assert release.wait(30)
            return self.inner.act(batch)

    from stratagem.agents.spec import make_agent

    server = serve(
        "ipd",
        agent=lambda g: Stalled(make_agent("strategy:TitForTat", g)),
        limits=Limits(model_timeout=0.3),
    )
    state = server.new_game()
    gid = state["game_id"]
    assert state["model_unavailable"] and state["model_late"]
    release.set()
    time.sleep(0.2)
    server.client.post(f"/api/games/{gid}/retry", headers={"Origin": ORIGIN})
    state = server.settle(gid)
    assert not state["model_unavailable"]
    assert server.turn(gid, {"action": "COOPERATE"}).status_code == 200
    assert server.settle(gid)["board"]["rounds"][0]["model"] == "COOPERATE"


def test_twenty_people_behind_one_address_poll_at_the_pages_pace(serve):
    pace = int(re.search(r"POLL_THINKING_MS = (\d+);", (STATIC / "main.js").read_text())[1])
    assert pace == 300
    now = [0.0]
    server = serve("ipd", spec="strategy:TitForTat", clock=lambda: now[0])
    clients = [server.client] + [other_client(server) for _ in range(19)]
    games = [server.new_game(c)["game_id"] for c in clients]
    refused = 0
    for _ in range(67):  # 20 s of polling: 1,340 polls from one address
        for client, gid in zip(clients, games, strict=True):
            now[0] += pace / 1000 / len(clients)
            refused += client.get(f"/api/games/{gid}").status_code == 429
    assert refused == 0
    # one session polling far faster than the page is still limited, to 300 a minute
    now[0] += 61
    codes = [server.client.get(f"/api/games/{games[0]}").status_code for _ in range(301)]
    assert set(codes[:300]) == {200} and codes[300] == 429
