"""Items to trade and the scenarios drawn from them (SPEC §8; seed 004 §3.4).

The shipped catalog is original: item types with a typical price range, crossed with condition
and detail variants, composed deterministically (a few hundred items across ten categories).
``load_craigslist`` reads the public CraigslistBargains listing files (low = 50 % of the posted
price, high = the posted price), one or several; like CoCoA's own scenario generator it leaves out
listings priced at $5 or less and description lines that quote a price (they would tell the buyer
another number). Every price, whatever its source, is checked where an item or scenario is built:
a finite number of at least ``MIN_PRICE`` and at most ``MAX_PRICE`` (the tools' cap), so no agent,
fallback or utility can leave the game's payoff bounds; a listing file with a bad price is refused
with a one-line message naming the listing. Splits are seeded 80 / 8.5 / 11.5. A scenario picks
GFT or NGFT first, then draws both reservation values uniformly inside the item's [low, high]
range, conditioned on their order.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from stratagem.errors import ConfigError
from stratagem.games.bargaining.tools import MAX_PRICE, MIN_PRICE
from stratagem.seeding import derive

Regime = Literal["GFT", "NGFT"]
SPLITS = (("train", 0.80), ("validation", 0.085), ("test", 0.115))
MIN_LISTING_PRICE = 5  # CoCoA's generator drops listings at $5 or less (placeholders, "free")
_QUOTED_PRICE = re.compile(r"\$\s*\d|\d\s*(?:\$|dollars?\b|bucks\b)", re.I)


def check_price(value: object, where: str) -> float:
    """Returns ``value`` as a float when it is a usable price, else raises ``ConfigError``.

    A usable price is a real number (not a bool), finite, at least ``MIN_PRICE`` and at most
    ``MAX_PRICE``; ``where`` names the price in the one-line message.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: price {value!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: price {value!r} is not finite")
    if not MIN_PRICE <= value <= MAX_PRICE:
        raise ConfigError(f"{where}: price {value!r} is outside [{MIN_PRICE:g}, {MAX_PRICE:g}]")
    return float(value)


@dataclass(frozen=True, slots=True)
class Item:
    """A catalog item: what it is and its historical price range (SPEC §8, Definition 1)."""

    title: str
    category: str
    description: str
    low: float  # historical low price
    high: float  # historical high price

    def __post_init__(self) -> None:
        """Refuses a price range no negotiation can use (``ConfigError`` naming the item)."""
        where = f"item {self.title!r}"
        check_price(self.low, f"{where} low")
        check_price(self.high, f"{where} high")
        if self.low > self.high:
            raise ConfigError(f"{where}: low {self.low:g} is above high {self.high:g}")

    @property
    def reference(self) -> float:
        """Returns the reference price: the midpoint of the historical range."""
        return (self.low + self.high) / 2


@dataclass(frozen=True, slots=True)
class Scenario:
    """One negotiation's deal: the item and both reservation values, GFT when v_b > v_s."""

    index: int
    item: Item
    seller_value: float  # v_s, the seller's cost
    buyer_value: float  # v_b, the buyer's willingness to pay
    regime: Regime

    def __post_init__(self) -> None:
        """Refuses reservation values that are not usable prices (``ConfigError``)."""
        check_price(self.seller_value, f"scenario {self.index} seller value")
        check_price(self.buyer_value, f"scenario {self.index} buyer value")

    def to_dict(self) -> dict:
        """Returns the scenario as JSON values (traces store it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Scenario:
        """Returns the scenario ``to_dict`` wrote."""
        return cls(d["index"], Item(**d["item"]), d["seller_value"], d["buyer_value"], d["regime"])


# category -> (item type, typical low, typical high, detail phrases)
_TYPES: dict[str, list[tuple[str, float, float, tuple[str, ...]]]] = {
    "electronics": [
        (
            "27-inch monitor",
            120,
            260,
            ("matte screen", "height-adjustable stand", "two HDMI ports"),
        ),
        (
            "mechanical keyboard",
            45,
            130,
            ("tactile switches", "aluminium frame", "detachable cable"),
        ),
        ("noise-cancelling headphones", 80, 240, ("carrying case", "30-hour battery", "foldable")),
        ("tablet, 64 GB", 110, 280, ("cover included", "charger included", "no scratches")),
        ("mirrorless camera body", 380, 820, ("low shutter count", "two batteries", "strap")),
        ("portable speaker", 30, 95, ("waterproof", "pairs with a second unit", "USB-C")),
    ],
    "furniture": [
        ("oak dining table", 220, 640, ("seats six", "one extension leaf", "oiled finish")),
        ("three-seat sofa", 180, 700, ("washable covers", "deep cushions", "pet-free home")),
        ("standing desk", 160, 420, ("electric lift", "memory presets", "cable tray")),
        ("bookshelf, five shelves", 40, 150, ("solid pine", "wall anchor kit", "easy to move")),
        ("office chair", 60, 260, ("lumbar support", "mesh back", "adjustable arms")),
        ("bed frame, queen", 120, 380, ("slatted base", "under-bed storage", "headboard")),
    ],
    "bikes": [
        ("road bike, 56 cm", 350, 1100, ("carbon fork", "new tyres", "11-speed")),
        ("commuter bike", 140, 420, ("fenders", "rear rack", "dynamo lights")),
        ("kids' bike, 20-inch", 50, 160, ("training wheels", "bell", "kickstand")),
        ("mountain bike, hardtail", 300, 900, ("hydraulic brakes", "front suspension", "29er")),
    ],
    "music": [
        ("acoustic guitar", 120, 480, ("solid spruce top", "gig bag", "new strings")),
        ("digital piano", 260, 760, ("weighted keys", "stand and pedal", "headphone jack")),
        ("violin, 4/4", 150, 600, ("bow and case", "rosin", "recently set up")),
        ("guitar amplifier, 40 W", 90, 260, ("two channels", "reverb", "footswitch")),
    ],
    "home": [
        ("espresso machine", 140, 520, ("steam wand", "descaled monthly", "two baskets")),
        ("stand mixer", 130, 330, ("three attachments", "glass bowl", "quiet motor")),
        ("robot vacuum", 90, 300, ("mapping", "spare brushes", "charging dock")),
        ("air purifier", 60, 210, ("HEPA filter", "spare filter", "night mode")),
        ("cast-iron pan set", 35, 110, ("three sizes", "seasoned", "lids included")),
    ],
    "sports": [
        ("rowing machine", 260, 820, ("magnetic resistance", "folds upright", "monitor")),
        ("adjustable dumbbells", 120, 380, ("pair", "up to 24 kg each", "stand included")),
        ("tennis racket", 40, 170, ("new grip", "cover", "strung last month")),
        ("camping tent, 4-person", 70, 260, ("rainfly", "footprint", "packs small")),
        ("snowboard, 156 cm", 130, 420, ("bindings included", "waxed", "all-mountain")),
    ],
    "tools": [
        ("cordless drill kit", 60, 190, ("two batteries", "bit set", "hard case")),
        ("table saw", 220, 620, ("rip fence", "blade guard", "folding stand")),
        ("pressure washer", 110, 330, ("four nozzles", "20 m hose", "detergent tank")),
        ("lawn mower, battery", 170, 460, ("mulching", "self-propelled", "grass bag")),
    ],
    "phones": [
        ("smartphone, 128 GB", 160, 520, ("unlocked", "battery at 89 %", "case included")),
        ("smartwatch", 70, 260, ("heart-rate sensor", "two straps", "GPS")),
        ("e-reader", 50, 140, ("backlit", "waterproof", "sleeve included")),
    ],
    "games": [
        ("game console", 180, 420, ("two controllers", "1 TB", "three games")),
        ("board game collection", 40, 140, ("eight games", "complete pieces", "sleeved cards")),
        ("VR headset", 180, 450, ("controllers", "charging dock", "elite strap")),
    ],
    "collectibles": [
        ("vinyl record lot", 30, 160, ("forty albums", "jazz and soul", "sleeves")),
        ("vintage film camera", 60, 280, ("working light meter", "50 mm lens", "strap")),
        ("first-edition novel", 80, 520, ("dust jacket", "signed", "near fine")),
    ],
}
_CONDITIONS = (("like new", 1.10), ("good", 1.0), ("well used", 0.78))
_AGES = ("bought last year", "two years old", "a few years old")


def builtin_catalog() -> list[Item]:
    """The shipped catalog: every type × condition × detail (≈ 400 items)."""
    items = []
    for category, types in _TYPES.items():
        for name, low, high, details in types:
            for condition, factor in _CONDITIONS:
                for k, detail in enumerate(details):
                    age = _AGES[(k + len(name)) % len(_AGES)]
                    spread = 1.0 + 0.06 * (k - 1)
                    items.append(
                        Item(
                            title=f"{name.capitalize()}, {condition}",
                            category=category,
                            description=f"{name.capitalize()} in {condition} condition, {age}; "
                            f"{detail}. Pick-up only.",
                            low=round(low * factor * spread, 2),
                            high=round(high * factor * spread, 2),
                        )
                    )
    return items


def load_craigslist(paths: str | Path | Sequence[str | Path]) -> list[Item]:
    """Items from one or several CraigslistBargains listing files (each a JSON list).

    Listings without a price or priced at ``MIN_LISTING_PRICE`` or less are left out, as CoCoA's
    generator does, and so are description lines that quote a price.

    Raises:
        ConfigError: a file that cannot be read, is not a list, or has a listing whose price is
            not finite or above ``MAX_PRICE`` (the message names the file and the listing).
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    items: list[Item] = []
    for path in paths:
        items += _read_listings(Path(path))
    return items


def _read_listings(path: Path) -> list[Item]:
    try:
        listings = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read Craigslist listings from {path}: {exc}") from None
    if not isinstance(listings, list):
        raise ConfigError(f"{path}: expected a JSON list of listings")
    items = []
    for number, row in enumerate(listings):
        if not isinstance(row, dict):
            continue
        title = " ".join(str(row.get("title", "")).split()) or "Untitled item"
        price = row.get("price")
        if price is None or isinstance(price, bool) or not isinstance(price, int | float):
            continue  # unpriced listings cannot anchor a scenario
        where = f"{path.name}: listing {number} ({title[:60]!r})"
        if not math.isfinite(price) or 0 < price < MIN_PRICE or price > MAX_PRICE:
            check_price(price, where)  # raises: NaN, Infinity, a denormal or a huge price is a
            # broken file, not a listing to leave out (0 and negatives mean "no price")
        if price <= MIN_LISTING_PRICE:
            continue  # placeholders and giveaways, dropped by CoCoA's generator too
        high = check_price(price, where)
        description = row.get("description") or []
        lines = description if isinstance(description, list) else [description]
        kept = [str(x).strip() for x in lines if not _QUOTED_PRICE.search(str(x))]
        items.append(
            Item(
                title=title,
                category=str(row.get("category", "other")),
                description=" ".join(x for x in kept if x),
                low=round(0.5 * high, 2),
                high=high,
            )
        )
    return items


def split(items: Sequence[Item], seed: int = 42) -> dict[str, list[Item]]:
    """Seeded 80 / 8.5 / 11.5 train / validation / test split."""
    order = list(range(len(items)))
    random.Random(derive(seed, "split")).shuffle(order)
    n_train = round(len(items) * SPLITS[0][1])
    n_val = round(len(items) * SPLITS[1][1])
    cuts = {
        "train": order[:n_train],
        "validation": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }
    return {name: [items[i] for i in idx] for name, idx in cuts.items()}


def scenario(items: Sequence[Item], index: int, regime: Regime, seed: int) -> Scenario:
    """Scenario ``index``: an item and two reservation values in its range, ordered by regime."""
    rng = random.Random(derive(seed, "scenario", index))
    item = items[rng.randrange(len(items))]
    a, b = sorted(round(rng.uniform(item.low, item.high), 2) for _ in range(2))
    if a == b:
        b = round(b + 0.01, 2)
    seller, buyer = (a, b) if regime == "GFT" else (b, a)
    return Scenario(index, item, seller, buyer, regime)


def scenarios(items: Sequence[Item], gft: int, ngft: int, seed: int = 42) -> list[Scenario]:
    """Exactly ``gft`` GFT then ``ngft`` NGFT scenarios (the same list for every pairing)."""
    if gft < 0 or ngft < 0 or gft + ngft == 0:
        raise ConfigError("need a positive number of scenarios (--gft, --ngft)")
    if not items:
        raise ConfigError("the catalog is empty")
    return [scenario(items, i, "GFT" if i < gft else "NGFT", seed) for i in range(gft + ngft)]


def sample_scenario(items: Sequence[Item], seed: int) -> Scenario:
    """One scenario with GFT : NGFT = 2 : 1 (for single episodes)."""
    regime: Regime = "GFT" if random.Random(derive(seed, "regime")).random() < 2 / 3 else "NGFT"
    return scenario(items, 0, regime, seed)


def digest(objects: Sequence[object]) -> str:
    """sha256 of a list of scenarios or items (golden hashes)."""
    text = json.dumps([asdict(o) for o in objects], sort_keys=True)  # type: ignore[call-overload]
    return hashlib.sha256(text.encode()).hexdigest()
