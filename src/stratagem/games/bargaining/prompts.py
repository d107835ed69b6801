"""Bargaining prompts: the system turn (role, reservation value, utility, item, tools, answer
format, optional strategy guide) and the user turn (the visible event log, then the state)."""

from __future__ import annotations

from stratagem.games.bargaining.catalog import Scenario

TOOL_HELP = (
    "make_offer(price, side_offer=None) - a binding offer at this price (side_offer: optional "
    "extra terms in words)",
    "respond_to_offer(response) - True accepts the other side's open offer (the deal closes at "
    "that price), False rejects it; ends your turn",
    "send_message(content) - a message to the other side (not binding)",
    "search_price() - look up the item's historical low and high price (only you see it)",
    "wait_for_response() - end your turn and wait for the other side",
    "wait_for_time_period(duration) - end your turn and let some time pass",
    "quit_negotiation() - walk away; nobody gets anything",
)
GUIDE = (
    "A few habits of good negotiators: open with an ambitious but credible price; concede in "
    "small, shrinking steps; never agree to a price beyond your reservation value, since that "
    "loses you money; if no price can leave you better off than walking away, walk away."
)


def system_prompt(s: Scenario, seat: int, max_rounds: int, guide: bool) -> str:
    item = s.item
    if seat == 0:
        role = (
            f"You are the SELLER. The item costs you ${s.seller_value:.2f} (your reservation "
            "value). If you sell at price p your utility is p minus that cost; with no deal it "
            "is 0. You speak first: list the item with make_offer."
        )
    else:
        role = (
            f"You are the BUYER. The item is worth ${s.buyer_value:.2f} to you (your "
            "reservation value). If you buy at price p your utility is that value minus p; "
            "with no deal it is 0. The seller lists the item first."
        )
    parts = [
        "You are negotiating the sale of one item with one other party.",
        role,
        f"Item: {item.title} ({item.category}). {item.description}",
        "Tools:\n" + "\n".join(f"- {t}" for t in TOOL_HELP),
        f"Each turn: at most 3 tool calls, and the last one must end the turn "
        f"(wait_for_response, respond_to_offer, wait_for_time_period or quit_negotiation). "
        f"The negotiation ends when an offer is accepted, someone quits, or after {max_rounds} "
        "rounds.",
        "Answer format (exactly this):\nThought: your private reasoning (the other side never "
        "sees it)\nCode:\n```py\nmake_offer(price=120)\nwait_for_response()\n```",
    ]
    if guide:
        parts.append(GUIDE)
    return "\n\n".join(parts)


def _describe(e, me: int) -> str:
    d = e.data
    if e.kind == "listing":
        text = f"listed the item at ${d['price']:.2f}"
    elif e.kind == "offer":
        text = f"offered ${d['price']:.2f}"
    elif e.kind == "respond":
        verb = "accepted" if d["accept"] else "rejected"
        text = f"{verb} the offer of ${d['price']:.2f}"
    elif e.kind == "message":
        text = f"said: \u201c{d['content']}\u201d"
    elif e.kind == "search":
        text = f"looked up the price history: ${d['low']:.2f} to ${d['high']:.2f}"
    elif e.kind == "quit":
        text = "walked away"
    elif e.kind == "wait_time":
        text = f"paused for {d['duration']:g} time units"
    elif e.kind == "fallback":
        text = f"could not be understood, so the turn passed ({d['reason']})"
    else:  # wait
        return ""
    if e.kind in ("listing", "offer") and d.get("side_offer"):
        text += f" with the side offer \u201c{d['side_offer']}\u201d"
    return text


def user_prompt(events, view, seat: int) -> str:
    """History first (stable across turns, so its KV cache can be reused), the state last."""
    lines = ["Negotiation so far:" if events else "Nothing has happened yet."]
    group: list[str] = []
    key = None
    for e in events:
        phrase = _describe(e, seat)
        if (e.time, e.seat) != key and group:
            lines.append(_line(key, group, seat))
            group = []
        key = (e.time, e.seat)
        if phrase:
            group.append(phrase)
    if group:
        lines.append(_line(key, group, seat))
    lines.append(f"Round {view.round} of {view.max_rounds}.")
    if view.their_standing is not None:
        other = "buyer" if seat == 0 else "seller"
        lines.append(f"Open offer from the {other}: ${view.their_standing:.2f}.")
    if view.correction:
        lines.append(f"Your last answer could not be used: {view.correction}. Answer again.")
    lines.append("Your turn.")
    return "\n".join(lines)


def _line(key, phrases: list[str], seat: int) -> str:
    time, who = key
    actor = "You" if who == seat else ("The seller" if who == 0 else "The buyer")
    return f"t={time:g}: {actor} " + "; then ".join(phrases) + "."
